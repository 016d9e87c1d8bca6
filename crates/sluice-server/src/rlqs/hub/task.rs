//! The hub's two tasks: one takes the open streams' events and ticks, beside the first
//! worker's streams; the other takes new streams' first events (their opening and first
//! report), on the intake runtime ([`crate::runtime::intake`]), where a new connection's
//! first stream runs too.
//!
//! Why two: a worker polls its tasks in turn, so while it reads a burst of reports the
//! hub's task waits its turn behind thousands of connections, and so would a new Envoy's
//! first assignment. The intake runtime has little else to do: a new stream's opening
//! there takes the hub at once, unless the other task holds it, for one event. The hub
//! is behind an async mutex (held across the store calls an event may make); each task
//! takes it for one event or tick at a time, and the mutex queues them fairly, so a flood
//! of new streams cannot starve the streams open, nor the other way round.

use super::{Event, Hub};
use crate::rlqs::timing::TICK;
use crate::runtime::shutdown::Shutdown;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Handle;
use tokio::sync::{Mutex, mpsc};

/// A task's future.
type TaskFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How long the hub's task on the first worker may work before it lets the worker's
/// other tasks, and its sockets' readiness, have a turn: events that resolve many new
/// buckets each could otherwise hold the worker for the 128 events tokio lets a task take
/// in a row (their first stream's accepting, for one, goes through the worker).
const WORK_IN_A_ROW: Duration = Duration::from_millis(2);

/// The hub's tasks, not started yet: [`HubTask::spawn`] starts them.
///
/// The service starts them from its first worker, beside that worker's streams: an
/// open stream's report then reaches the hub, and its answer the stream, without waking
/// another thread (with one worker, none ever does). Measured with
/// `scripts/rlqs_fleet.sh` (docs/benchmarks.md, "RLQS at fleet scale").
pub(crate) struct HubTask {
    events: TaskFuture,
    firsts: TaskFuture,
}

impl HubTask {
    /// The tasks of `hub`, taking new streams' first events from `first` and the others'
    /// from `events`, until `shutdown` (or every handle is gone).
    pub(super) fn new(
        hub: Hub,
        (first, events): (mpsc::Receiver<Event>, mpsc::Receiver<Event>),
        shutdown: Shutdown,
    ) -> HubTask {
        let hub = Arc::new(Mutex::new(hub));
        let firsts = Box::pin(take_firsts(Arc::clone(&hub), first, shutdown.clone()));
        HubTask { events: Box::pin(take_events(hub, events, shutdown)), firsts }
    }

    /// Starts the hub: its open streams' events and its ticks on the calling runtime, new
    /// streams' first events on `intake`.
    pub(crate) fn spawn(self, intake: &Handle) {
        drop(tokio::spawn(self.events));
        drop(intake.spawn(self.firsts));
    }
}

impl std::fmt::Debug for HubTask {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("HubTask")
    }
}

/// Takes in the open streams' events, and ticks, until `shutdown` (or every handle is
/// gone); then ends every stream ([`Hub::stop`]).
async fn take_events(hub: Arc<Mutex<Hub>>, mut events: mpsc::Receiver<Event>, shutdown: Shutdown) {
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stopping = shutdown.wait();
    tokio::pin!(stopping);
    let mut worked = Duration::ZERO;
    loop {
        let started = Instant::now();
        tokio::select! {
            biased;
            () = &mut stopping => break,
            event = events.recv() => match event {
                Some(event) => hub.lock().await.take(event).await,
                None => break,
            },
            _ = ticks.tick() => hub.lock().await.tick_and_send().await,
        }
        // Counted from the select's start: waiting for an event counts too, which only
        // makes the task yield a little earlier after a quiet spell.
        worked += started.elapsed();
        if worked >= WORK_IN_A_ROW {
            tokio::task::yield_now().await;
            worked = Duration::ZERO;
        }
    }
    hub.lock().await.stop();
}

/// Takes in new streams' first events until `shutdown` (or every handle is gone).
async fn take_firsts(hub: Arc<Mutex<Hub>>, mut first: mpsc::Receiver<Event>, shutdown: Shutdown) {
    let stopping = shutdown.wait();
    tokio::pin!(stopping);
    loop {
        tokio::select! {
            biased;
            () = &mut stopping => return,
            event = first.recv() => match event {
                Some(event) => hub.lock().await.take(event).await,
                None => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::service_file::ServiceConfig;
    use crate::config::settings::{SettingFlags, Settings};
    use crate::engine::Engine;
    use crate::engine::backend::Backend;
    use crate::engine::service_state::ServiceState;
    use crate::metrics::Metrics;
    use crate::rlqs::hub::{HubHandle, Outbox};
    use crate::rlqs::report;
    use crate::rlqs::shares::StreamId;
    use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
    use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
        BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
    };
    use std::task::Poll;
    use std::time::Duration;

    /// A service on the embedded store with docs/envoy-rlqs-sluice.yaml's rules.
    async fn service() -> Arc<ServiceState> {
        let config = ServiceConfig::parse(include_str!("../../../../../docs/envoy-rlqs-sluice.yaml")).unwrap();
        let flags = SettingFlags { snapshot: Some("off".into()), workers: Some(1), ..SettingFlags::default() };
        let settings = Settings::resolve(&flags, &config.server).unwrap();
        let backend = Backend::open(&settings).await.unwrap();
        let engine = Engine::new(backend, config, Metrics::new(settings.figures()), false);
        Arc::new(ServiceState::new(engine, settings, None))
    }

    /// A single-threaded runtime on a thread of its own, as the first worker's.
    fn first_worker() -> Handle {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            sender.send(runtime.handle().clone()).unwrap();
            runtime.block_on(std::future::pending::<()>());
        });
        receiver.recv().unwrap()
    }

    /// Blocks a thread of the runtime of `handle` in a task until the returned sender sends
    /// (or is dropped); returns once it is blocked.
    fn hold(handle: &Handle) -> std::sync::mpsc::Sender<()> {
        let (holding, held) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        drop(handle.spawn(async move {
            holding.send(()).unwrap();
            let _ = released.recv();
        }));
        held.recv().unwrap();
        release
    }

    /// The bucket `{plan: free, tenant: tenant}`.
    fn bucket(tenant: &str) -> BucketId {
        BucketId { bucket: [("plan", "free"), ("tenant", tenant)].map(|(k, v)| (k.to_owned(), v.to_owned())).into() }
    }

    /// Whether `response` has an action for `id`.
    fn answers(response: &RateLimitQuotaResponse, id: &BucketId) -> bool {
        response.bucket_action.iter().any(|action| action.bucket_id.as_ref() == Some(id))
    }

    /// The hub of a service on the embedded store, started: its open streams' lane on a
    /// first worker of its own (returned), new streams' lane on the calling runtime.
    async fn started_hub() -> (HubHandle, Handle) {
        let (hub, task) = super::super::new(service().await, Shutdown::when(std::future::pending(), Duration::ZERO));
        let (worker, intake) = (first_worker(), Handle::current());
        worker.spawn(async move { task.spawn(&intake) }).await.unwrap();
        (hub, worker)
    }

    /// The opening of `stream`, answered through `outbox`.
    fn opening(stream: StreamId, outbox: Outbox) -> Event {
        Event::Open {
            stream,
            connection: std::net::SocketAddr::from(([127, 0, 0, 1], 1)),
            domain: "quota".to_owned(),
            outbox,
        }
    }

    /// A first report in domain `quota` of one request of `id`.
    fn first_report(id: &BucketId) -> RateLimitQuotaUsageReports {
        let usage =
            BucketQuotaUsage { bucket_id: Some(id.clone()), num_requests_allowed: 1, ..BucketQuotaUsage::default() };
        RateLimitQuotaUsageReports { domain: "quota".to_owned(), bucket_quota_usages: vec![usage] }
    }

    // Regression test for issue 43: a new Envoy's first assignment waited for the first
    // worker to reach the hub's task, behind every connection the worker had to read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_new_streams_first_events_are_answered_while_the_first_worker_is_held() {
        let (hub, worker) = started_hub().await;
        let release = hold(&worker);
        let (outbox, mut responses) = mpsc::channel(4);
        let stream = hub.new_stream();
        let id = bucket("new");
        let buckets = report::read(first_report(&id), hub.bounds).unwrap();
        let opened = hub.open(opening(stream, outbox), Event::Report { stream, buckets });
        let opened = tokio::time::timeout(Duration::from_secs(30), opened).await;
        let answer = tokio::time::timeout(Duration::from_secs(30), responses.recv()).await;
        release.send(()).unwrap();
        assert!(opened.is_ok_and(|taken| taken), "taken in while the first worker is held");
        let response = answer.expect("answered while the first worker is held").unwrap().unwrap();
        assert!(answers(&response, &id), "{response:?}");
    }

    // The two lanes are taken by two tasks: a report passed on once `open` returned must
    // not overtake the stream's opening (its new bucket would be dropped, never answered).
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn opening_a_stream_waits_until_the_hub_has_taken_it_in() {
        let (hub, _worker) = started_hub().await;
        let release = hold(&Handle::current());
        let (outbox, mut responses) = mpsc::channel(4);
        let stream = hub.new_stream();
        let (first, second) = (bucket("first"), bucket("second"));
        let buckets = report::read(first_report(&first), hub.bounds).unwrap();
        let opened = hub.open(opening(stream, outbox), Event::Report { stream, buckets });
        tokio::pin!(opened);
        let waited = std::future::poll_fn(|context| Poll::Ready(opened.as_mut().poll(context).is_pending())).await;
        release.send(()).unwrap();
        assert!(waited, "open returned before the hub took the stream in");
        assert!(opened.await);
        let buckets = report::read(first_report(&second), hub.bounds).unwrap();
        assert!(hub.send(Event::Report { stream, buckets }).await);
        let mut answered = [false, false];
        while answered != [true, true] {
            let response = tokio::time::timeout(Duration::from_secs(30), responses.recv()).await;
            let response = response.expect("both buckets answered").unwrap().unwrap();
            answered = [answered[0] || answers(&response, &first), answered[1] || answers(&response, &second)];
        }
    }
}
