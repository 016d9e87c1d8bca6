//! The hub: one task per process that holds every RLQS stream and bucket, divides each
//! bucket's quota among the Envoys holding it, and pushes what changes to them at once.
//!
//! The gRPC streams (on any worker) only check what Envoy sends and pass it on as
//! [`Event`]s; everything else happens here, on one task, in event order, so the shares
//! need no lock. A tick renews assignments, abandons the buckets of Envoys that stopped
//! reporting, gives fresh shares as windows turn, and notices a reload (every bucket is
//! abandoned then, to be reported again under the new rules). At shutdown, every Envoy
//! is told to abandon every bucket before its stream ends.

mod buckets;
mod stream_state;
mod streams;

use super::report::{BucketReport, ReportBounds};
use super::shares::StreamId;
use super::timing::Timing;
use crate::engine::Loaded;
use crate::engine::service_state::ServiceState;
use crate::runtime::shutdown::Shutdown;
use buckets::SharedBucket;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use stream_state::StreamState;
use tokio::sync::mpsc;
use tonic::Status;

/// How often the hub renews, abandons and re-divides, when no report comes.
const TICK: Duration = Duration::from_millis(200);

/// Events the hub queues before the streams wait to pass more on.
const EVENTS_QUEUED: usize = 1024;

/// Where a stream's responses go: the stream sends them on to Envoy.
pub(crate) type Outbox = mpsc::Sender<Result<RateLimitQuotaResponse, Status>>;

/// What a stream tells the hub.
#[derive(Debug)]
pub(crate) enum Event {
    /// A stream began, in `domain` (its first report's).
    Open { stream: StreamId, domain: String, outbox: Outbox },
    /// A stream's report, checked.
    Report { stream: StreamId, buckets: Vec<BucketReport> },
    /// A stream sent something invalid: it ends with `status`.
    Fail { stream: StreamId, status: Status },
    /// A stream ended.
    Close { stream: StreamId },
}

/// How streams reach the hub.
#[derive(Clone, Debug)]
pub(crate) struct HubHandle {
    events: mpsc::Sender<Event>,
    next_stream: Arc<AtomicU64>,
    /// The bounds on reports, as the streams check them.
    pub(crate) bounds: ReportBounds,
}

impl HubHandle {
    /// A number for a new stream.
    pub(crate) fn new_stream(&self) -> StreamId {
        self.next_stream.fetch_add(1, Ordering::Relaxed)
    }

    /// Passes `event` on; false when the hub has stopped (shutdown).
    pub(crate) async fn send(&self, event: Event) -> bool {
        self.events.send(event).await.is_ok()
    }
}

/// Starts the hub for `service` on the calling runtime, until `shutdown`.
pub(crate) fn spawn(service: Arc<ServiceState>, shutdown: Shutdown) -> HubHandle {
    let (events, inbox) = mpsc::channel(EVENTS_QUEUED);
    let settings = &service.settings;
    let bounds = ReportBounds { max_entries: settings.max_descriptor_entries, max_buckets: settings.max_rlqs_buckets };
    let timing = Timing { report_interval: settings.rlqs_report_interval };
    let loaded = Arc::clone(&service.engine.loaded());
    let hub = Hub {
        service,
        timing,
        bounds,
        loaded,
        streams: HashMap::new(),
        shared: HashMap::new(),
        outgoing: HashMap::new(),
    };
    tokio::spawn(hub.run(inbox, shutdown));
    HubHandle { events, next_stream: Arc::new(AtomicU64::new(1)), bounds }
}

/// The hub's state.
struct Hub {
    service: Arc<ServiceState>,
    timing: Timing,
    bounds: ReportBounds,
    /// The configuration the buckets were resolved under.
    loaded: Arc<Loaded>,
    streams: HashMap<StreamId, StreamState>,
    /// The buckets with a limit, by state key.
    shared: HashMap<String, SharedBucket>,
    /// Actions for each stream since the last [`Hub::flush`]: one response per stream per
    /// event or tick, however many buckets changed.
    outgoing: HashMap<StreamId, Vec<BucketAction>>,
}

impl Hub {
    async fn run(mut self, mut inbox: mpsc::Receiver<Event>, shutdown: Shutdown) {
        let mut ticks = tokio::time::interval(TICK);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stopping = shutdown.wait();
        tokio::pin!(stopping);
        loop {
            tokio::select! {
                () = &mut stopping => break,
                event = inbox.recv() => match event {
                    Some(event) => self.handle(event).await,
                    None => break,
                },
                _ = ticks.tick() => self.tick().await,
            }
            self.flush();
            self.publish();
        }
        self.abandon_all("shutdown");
        self.streams.clear();
        self.publish();
    }

    async fn handle(&mut self, event: Event) {
        match event {
            Event::Open { stream, domain, outbox } => {
                self.streams.insert(stream, StreamState::new(domain, outbox));
            }
            Event::Report { stream, buckets } => self.report(stream, buckets).await,
            Event::Fail { stream, status } => self.fail(stream, status),
            Event::Close { stream } => self.close(stream),
        }
    }

    /// Renews, abandons and re-divides what is due; first, abandons everything when the
    /// configuration was reloaded.
    async fn tick(&mut self) {
        let current = Arc::clone(&self.service.engine.loaded());
        if !Arc::ptr_eq(&current, &self.loaded) {
            self.abandon_all("reload");
            self.loaded = current;
        }
        let now = self.service.engine.now();
        let due: Vec<String> =
            self.shared.iter().filter(|(_, bucket)| bucket.is_due(now)).map(|(key, _)| key.clone()).collect();
        for key in due {
            self.drop_stale(&key, now);
            self.renew(&key, now);
            self.divide_when_due(&key, now).await;
            match self.shared.get_mut(&key) {
                Some(bucket) if bucket.is_empty() => {
                    self.shared.remove(&key);
                }
                Some(bucket) => bucket.reschedule(now),
                None => {}
            }
        }
    }

    /// Sends each stream the actions gathered for it, as one response.
    fn flush(&mut self) {
        for (stream, actions) in self.outgoing.drain() {
            stream_state::deliver(&self.streams, stream, actions);
        }
    }

    /// Publishes the streams and buckets held.
    fn publish(&self) {
        let buckets = self.streams.values().map(StreamState::len).sum();
        self.service.engine.metrics().rlqs().hold(self.streams.len(), buckets);
    }
}
