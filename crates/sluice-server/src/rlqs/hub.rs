//! The hub: one per process, holding every RLQS stream and bucket; it divides each
//! bucket's quota among the Envoys holding it, and pushes what changes to them at once.
//!
//! The gRPC streams (on any worker) only check what Envoy sends and pass it on as
//! [`Event`]s; everything else happens here, one event at a time (two tasks take turns,
//! one for new streams' first events, see [`HubTask`]), so the shares need no lock of
//! their own. A tick renews refusals, closes shares as their window ends, abandons the
//! buckets of Envoys that stopped reporting, gives fresh shares as windows turn, and
//! notices a reload (the buckets the new rules serve otherwise are abandoned then, to be
//! reported again under them). At shutdown the streams end and what each Envoy was told
//! runs out on its own (setting `rlqs_abandon_on_shutdown` abandons every bucket first
//! instead).
//!
//! The hub composes what it holds, each in its own file: [`streams::Streams`] (each
//! stream's buckets and outbox, and each connection's share of the buckets, kept as
//! [`room::Room`] counts so that a report never walks the streams), [`buckets::Buckets`]
//! (the shares of each limited bucket) and [`outgoing::Outgoing`] (the actions not sent
//! yet); the streams reach it through [`handle::HubHandle`].

mod buckets;
mod handle;
mod outgoing;
mod room;
mod shared_bucket;
mod stream_state;
mod streams;
mod task;

pub(crate) use handle::{Event, HubHandle, Outbox};
pub(crate) use task::HubTask;

use super::assignment::blanket;
use super::report::{BucketReport, ReportBounds};
use super::shares::StreamId;
use super::timing::Timing;
use crate::engine::Loaded;
use crate::engine::service_state::ServiceState;
use crate::metrics::BucketCensus;
use crate::runtime::shutdown::Shutdown;
use buckets::Buckets;
use outgoing::Outgoing;
use sluice_core::Timestamp;
use std::sync::Arc;
use std::time::Duration;
use stream_state::Tracked;
use streams::{Admit, Streams};
use tokio::sync::mpsc;
use tonic::Status;

/// How often the hub counts what each Envoy holding a limited bucket was last told.
const CENSUS_EVERY: Duration = Duration::from_secs(1);

/// Why a stream is ended to make room for another connection's buckets.
const EVICTED: &str = "the service holds `max_rlqs_buckets` RLQS buckets and this connection holds more than its \
                       share: its stream holding the most is ended to make room for another connection's";

/// Events the hub queues before the streams wait to pass more on.
const EVENTS_QUEUED: usize = 1024;

/// The hub for `service`, serving until `shutdown`: the handle streams reach it by, and
/// its task, to start.
pub(crate) fn new(service: Arc<ServiceState>, shutdown: Shutdown) -> (HubHandle, HubTask) {
    let (events, inbox) = mpsc::channel(EVENTS_QUEUED);
    let (first, first_inbox) = mpsc::channel(EVENTS_QUEUED);
    let settings = &service.settings;
    let bounds = ReportBounds { max_entries: settings.max_descriptor_entries, max_buckets: settings.max_rlqs_buckets };
    let timing = Timing { report_interval: settings.rlqs_report_interval };
    let loaded = Arc::clone(&service.engine.loaded());
    let hub = Hub {
        service,
        timing,
        loaded,
        streams: Streams::new(bounds.max_buckets),
        buckets: Buckets::new(timing),
        outgoing: Outgoing::default(),
        census_at: Timestamp::EPOCH,
        stopped: false,
    };
    let task = HubTask::new(hub, (first_inbox, inbox), shutdown);
    (HubHandle::new(events, first, bounds), task)
}

/// The hub's state.
struct Hub {
    service: Arc<ServiceState>,
    timing: Timing,
    /// The configuration the buckets were resolved under.
    loaded: Arc<Loaded>,
    streams: Streams,
    /// The buckets with a limit.
    buckets: Buckets,
    /// Actions for each stream since the last [`Hub::flush`].
    outgoing: Outgoing,
    /// When the last census of answers was published.
    census_at: Timestamp,
    /// Set at shutdown: every stream has been ended, and events are dropped.
    stopped: bool,
}

impl Hub {
    /// Does what `event` asks and sends what it changed; drops it once stopped (an
    /// opening's outbox with it, which ends its stream).
    async fn take(&mut self, event: Event) {
        if self.stopped {
            return;
        }
        self.handle(event).await;
        self.flush();
        self.publish();
    }

    /// Ticks ([`Hub::tick`]) and sends what it changed.
    async fn tick_and_send(&mut self) {
        if self.stopped {
            return;
        }
        self.tick().await;
        self.flush();
        self.publish();
    }

    /// Ends every stream, first telling each to abandon every bucket when so configured.
    fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if self.service.settings.rlqs_abandon_on_shutdown {
            self.abandon_all("shutdown");
        }
        self.streams.clear();
        self.publish();
    }

    /// Does what `event` asks.
    async fn handle(&mut self, event: Event) {
        match event {
            Event::Open { stream, connection, domain, outbox } => self.streams.open(stream, connection, domain, outbox),
            Event::Report { stream, buckets } => self.report(stream, buckets).await,
            Event::Fail { stream, status } => self.fail(stream, status),
            Event::Close { stream } => self.close(stream),
            Event::Taken { taken } => drop(taken.send(())),
        }
    }

    /// Renews, abandons and re-divides what is due; first, when the configuration was
    /// reloaded, abandons the buckets it serves otherwise now.
    async fn tick(&mut self) {
        let current = Arc::clone(&self.service.engine.loaded());
        if !Arc::ptr_eq(&current, &self.loaded) {
            self.loaded = current;
            self.abandon_changed();
        }
        let engine = &self.service.engine;
        let now = engine.now();
        for key in self.buckets.due(now) {
            for (stream, id) in self.buckets.drop_stale(&key, now, engine, &mut self.outgoing) {
                self.streams.forget(stream, &id);
            }
            self.buckets.renew(&key, now, engine, &mut self.outgoing);
            self.buckets.divide_when_due(&key, now, engine, &mut self.outgoing).await;
            self.buckets.settle(&key, now);
        }
        if now.saturating_since(self.census_at) >= CENSUS_EVERY {
            self.census_at = now;
            let (counts, listed) = self.buckets.census(now);
            engine.metrics().rlqs().census(counts);
            engine.metrics().rlqs().list(listed);
        }
    }

    /// Takes in `stream`'s report: each bucket is resolved the first time it is seen, its
    /// usage counted, and its quota re-divided at once.
    async fn report(&mut self, stream: StreamId, buckets: Vec<BucketReport>) {
        let now = self.service.engine.now();
        let count = buckets.len();
        let mut actions = Vec::new();
        let mut changed = Vec::new();
        for bucket in buckets {
            match self.track(stream, &bucket) {
                Err(status) => return self.fail(stream, status),
                Ok(Tracked::NoRule) => {}
                Ok(Tracked::Blanket { id, rule }) => actions.push(blanket(&id, rule, self.timing.blanket_ttl())),
                Ok(Tracked::Shared { key, .. }) => {
                    let engine = &self.service.engine;
                    self.buckets.charge(&key, (stream, bucket.usage), now, engine, &mut self.outgoing).await;
                    changed.push(key);
                }
            }
        }
        let engine = &self.service.engine;
        engine.metrics().rlqs().count_assignments(actions.len());
        self.outgoing.extend(stream, actions);
        changed.dedup();
        for key in changed {
            self.buckets.divide(&key, now, engine, &mut self.outgoing).await;
        }
        // Counted once taken in, so whoever sees the count sees the usage counted.
        engine.metrics().rlqs().count_reports(count);
    }

    /// What applies to `bucket` of `stream`, resolved under the rules in force when first
    /// seen (a bucket with no rule, at each report); `RESOURCE_EXHAUSTED` when the service
    /// holds as many buckets as it may and the stream's connection holds its share. A
    /// connection under its share takes room from the one holding the most ([`room`]).
    fn track(&mut self, stream: StreamId, bucket: &BucketReport) -> Result<Tracked, Status> {
        match self.streams.admit(stream, &bucket.entries) {
            Admit::Known(tracked) => return Ok(tracked),
            Admit::Refused(status) => return Err(status),
            Admit::Evict(other) => self.fail(other, Status::resource_exhausted(EVICTED)),
            Admit::Free => {}
        }
        let rules = self.loaded.config.envoy();
        let shadow_all = self.service.settings.shadow_mode;
        let Some(domain) = self.streams.domain(stream) else { return Ok(Tracked::NoRule) };
        let tracked = self.buckets.resolve(rules, shadow_all, stream, domain, bucket)?;
        self.streams.record(stream, bucket.entries.clone(), tracked.clone());
        Ok(tracked)
    }

    /// Ends `stream` with `status`, forgetting what it held.
    fn fail(&mut self, stream: StreamId, status: Status) {
        self.streams.end_with(stream, status);
        self.close(stream);
    }

    /// Forgets `stream` and what it held (its stream ended: nobody to tell).
    fn close(&mut self, stream: StreamId) {
        let Some(state) = self.streams.close(stream) else { return };
        for key in state.shared_keys() {
            self.buckets.release(key, stream);
        }
    }

    /// Tells every stream to abandon every bucket it was assigned, and forgets them all.
    fn abandon_all(&mut self, reason: &'static str) {
        self.outgoing.clear();
        let count = self.streams.abandon_all();
        self.buckets.clear();
        let metrics = self.service.engine.metrics().rlqs();
        metrics.count_abandons(reason, count);
        metrics.list(BucketCensus::of(self.service.engine.now().as_micros(), 0, Vec::new()));
    }

    /// Tells each stream to abandon the buckets the rules now in force serve otherwise than
    /// it was told: another blanket rule, another limit or key, or none. The others keep
    /// their shares and refusals, so a reload that leaves a rule as it was changes nothing
    /// for its Envoys.
    fn abandon_changed(&mut self) {
        // What was decided before the reload goes out first, so that an abandon follows it.
        self.flush();
        let rules = (self.loaded.config.envoy(), self.service.settings.shadow_mode);
        let buckets = &self.buckets;
        let (count, released) = self
            .streams
            .abandon_unless(|domain, entries, tracked| buckets.still_applies(rules, domain, entries, tracked));
        for (stream, key) in released {
            self.buckets.release(&key, stream);
        }
        self.buckets.drop_unheld();
        self.service.engine.metrics().rlqs().count_abandons("reload", count);
    }

    /// Sends each stream the actions gathered for it, as one response.
    fn flush(&mut self) {
        for (stream, actions) in self.outgoing.drain() {
            self.streams.deliver(stream, actions);
        }
    }

    /// Publishes the streams and buckets held.
    fn publish(&self) {
        self.service.engine.metrics().rlqs().hold(self.streams.len(), self.streams.held());
    }
}
