//! `sluice serve`: wires the store, the engine, the front ends and the background tasks.

mod announce;
pub(crate) mod reload;
pub(crate) mod snapshot;
pub(crate) mod start;

use crate::config::serve_args::ServeArgs;
use crate::config::settings::{LogFormat, Settings};
use crate::engine::Engine;
use crate::engine::backend::Backend;
use crate::engine::front::Front;
use crate::engine::service_state::ServiceState;
use crate::grpc;
use crate::grpc::message_deadline::{MessageDeadlineLayer, MessageLimits};
use crate::grpc::rlqs::RateLimitQuotaGrpc;
use crate::grpc::rlqs_server::RlqsServer;
use crate::grpc::rls::{RateLimitGrpc, RateLimitServiceServer};
use crate::grpc::server::Http2Settings;
use crate::http;
use crate::http::MakeApi;
use crate::metrics::{Metrics, StoreSeries};
use crate::rlqs::hub::{self, HubHandle, HubTask};
use crate::runtime::handoff::{Handoff, Queue};
use crate::runtime::idle::Timeouts;
use crate::runtime::shutdown::{self, Shutdown};
use crate::runtime::workers::{Job, Workers};
use crate::serve::start::{InitialConfig, Listeners};
use futures_util::future::join_all;
use sluice_core::Limit;
use sluice_core::lease::Unspent;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Runs `sluice serve` until SIGTERM or SIGINT.
pub(crate) fn run_command(args: &ServeArgs) -> anyhow::Result<()> {
    let initial = InitialConfig::read(args.config.as_deref())?;
    let settings = Settings::resolve(&args.settings, &initial.config.server)
        .map_err(|error| anyhow::anyhow!("invalid settings: {error}"))?;
    if let Some((setting, problem)) = settings.problem_between() {
        anyhow::bail!("invalid settings: {setting}: {problem}");
    }
    init_logs(settings.log_format == LogFormat::Json);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let served = runtime.block_on(async {
        let listeners = Listeners::bind(&settings).await?;
        // Signal handlers first: once the addresses are printed, signals must find them.
        let signals = shutdown::signals(settings.shutdown_grace);
        run(settings, initial, listeners, signals).await
    });
    // Not an unbounded wait for the background tasks' blocking work (a file read for the
    // reload watch): the exit is bounded.
    runtime.shutdown_timeout(Duration::from_millis(500));
    served
}

/// Serves `initial` with `settings` on `listeners` until `shutdown` completes; then lets
/// requests in flight finish within the shutdown grace period, writes the last snapshot
/// and returns. The command's seam (as mini-redis's `server::run`): a test runs the
/// service in its own process, on listeners it bound, and stops it when it is done.
pub(crate) async fn run(
    settings: Settings,
    initial: InitialConfig,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let shutdown = Shutdown::when(shutdown, settings.shutdown_grace);
    crate::config::leases::check_leases(&settings, initial.config.limits()).map_err(anyhow::Error::msg)?;
    let backend = Backend::open(&settings).await?;
    if let (Some(path), Some(store)) = (&settings.snapshot, backend.memory()) {
        let limits: Vec<Limit> = initial.config.limits().cloned().collect();
        snapshot::load(path, store, &limits, settings.discard_bad_snapshot)?;
    }
    let series = StoreSeries {
        states: backend.memory().is_some(),
        leases: backend.redis().is_some() && !settings.lease_period.is_zero(),
    };
    let metrics = Metrics::new(settings.figures()).with_store_series(series);
    let engine = Engine::new(backend, initial.config, metrics, settings.shadow_mode);
    let service = Arc::new(ServiceState::new(engine, settings, initial.path));
    if let Some(bytes) = initial.bytes {
        service.config_read(bytes);
    }
    // The file watch compares with the content parsed, so no change is missed.
    reload::on_sighup(Arc::clone(&service));
    reload::on_file_change(Arc::clone(&service));
    let periodic = (service.settings.snapshot.is_some() && service.engine.backend().memory().is_some())
        .then(|| tokio::spawn(snapshot::run_periodically(Arc::clone(&service))));
    let sweeping = (!service.settings.lease_period.is_zero())
        .then(|| tokio::spawn(sweep_leases_periodically(Arc::clone(&service))));
    let hub = hub::new(Arc::clone(&service), shutdown.clone());
    let served = serve_connections(&service, hub, listeners, &shutdown).await;
    // The last snapshot, also when serving ended in an error: the store still holds every
    // decision made. It waits for a periodic one in progress, and is the last written.
    periodic.inspect(tokio::task::JoinHandle::abort);
    sweeping.inspect(tokio::task::JoinHandle::abort);
    // Nothing is spent any more: what is held goes back to the other servers.
    service.engine.backend().settle_leases(service.engine.now(), Unspent::All).await;
    if snapshot::save_now(&service).await && served.is_ok() {
        tracing::info!("stopped");
    }
    served
}

/// Every lease period, gives up the leased units that can no longer be spent, gives back
/// those of keys gone quiet for a period, and forgets idle keys' leases.
async fn sweep_leases_periodically(service: Arc<ServiceState>) {
    let mut ticks = tokio::time::interval(service.settings.lease_period);
    loop {
        ticks.tick().await;
        service.engine.backend().settle_leases(service.engine.now(), Unspent::OfQuietKeys).await;
    }
}

/// Starts the workers and, once every one can serve, announces the service and accepts on
/// `[http, grpc, resp]` until shutdown; then waits for the workers, which finish the
/// requests in flight within the shutdown grace period and drop what is left after it.
async fn serve_connections(
    service: &Arc<ServiceState>,
    (hub, hub_task): (HubHandle, HubTask),
    Listeners { http, grpc, resp }: Listeners,
    shutdown: &Shutdown,
) -> anyhow::Result<()> {
    let count = service.settings.workers;
    let max_connections = service.settings.max_connections;
    let (http_handoff, http_queues) = Handoff::new(count, max_connections, "HTTP");
    let (grpc_handoff, grpc_queues) = Handoff::new(count, max_connections, "gRPC");
    let (resp_handoff, resp_queues): (_, Vec<Option<Queue>>) = match &resp {
        Some(_) => {
            let (handoff, queues) = Handoff::new(count, max_connections, "RESP");
            (Some(handoff), queues.into_iter().map(Some).collect())
        }
        None => (None, std::iter::repeat_with(|| None).take(count.max(1)).collect()),
    };
    let queues = http_queues.into_iter().zip(grpc_queues).zip(resp_queues).map(|((http, grpc), resp)| WorkerQueues {
        http,
        grpc,
        resp,
    });
    // New gRPC connections start on this runtime, which only accepts and runs background
    // work ([`crate::runtime::intake`]).
    let intake = tokio::runtime::Handle::current();
    let (workers, ready) = start_workers(service, (&hub, hub_task), queues, &intake, shutdown)?;
    // Nothing is accepted, nor announced, before every worker can serve: a request must
    // never wait for a worker's store connection (`/readyz` and the "listening" lines
    // mean it).
    if join_all(ready).await.iter().any(Result::is_err) {
        return workers.wait().await.and(Err(anyhow::anyhow!("a worker stopped before it could serve")));
    }
    announce::announce(service, &http, &grpc, resp.as_ref())?;
    service.set_ready(true);
    let accept_resp = async {
        if let (Some(handoff), Some(listener)) = (resp_handoff, resp) {
            handoff.accept(listener, shutdown.clone().wait()).await;
        }
    };
    tokio::join!(
        async {
            shutdown.clone().wait().await;
            service.set_ready(false);
        },
        http_handoff.accept(http, shutdown.clone().wait()),
        grpc_handoff.accept(grpc, shutdown.clone().wait()),
        accept_resp,
    );
    wait_for(workers, shutdown).await
}

/// One worker's share of each listener's connections.
#[derive(Debug)]
struct WorkerQueues {
    http: Queue,
    grpc: Queue,
    /// `None` when the RESP front is off.
    resp: Option<Queue>,
}

/// Starts one worker per set of queues; each tells on its receiver when it can serve.
fn start_workers(
    service: &Arc<ServiceState>,
    (hub, hub_task): (&HubHandle, HubTask),
    queues: impl Iterator<Item = WorkerQueues>,
    intake: &tokio::runtime::Handle,
    shutdown: &Shutdown,
) -> anyhow::Result<(Workers, Vec<oneshot::Receiver<()>>)> {
    let mut ready = Vec::new();
    let mut jobs = Vec::new();
    // The hub runs on the first worker, new streams' first events on the intake runtime
    // ([`HubTask`]).
    let mut hub_task = Some(hub_task);
    for queues in queues {
        let (sender, receiver) = oneshot::channel();
        ready.push(receiver);
        let hub = (hub.clone(), hub_task.take());
        jobs.push(worker(Arc::clone(service), hub, queues, (intake.clone(), shutdown.clone()), sender));
    }
    Ok((Workers::start(jobs)?, ready))
}

/// Waits for the workers; they stop at the latest when the grace period is over. Should
/// one not (a thread stuck outside its runtime), the exit goes on a second later anyway.
async fn wait_for(workers: Workers, shutdown: &Shutdown) -> anyhow::Result<()> {
    let overdue = async {
        shutdown.clone().forced().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    tokio::select! {
        result = workers.wait() => result,
        () = overdue => {
            tracing::error!("a worker did not stop after the shutdown grace period; exiting without it");
            Ok(())
        }
    }
}

/// One worker's job: open its engine's store connection, say it is ready, then serve the
/// HTTP and gRPC connections it is handed (new gRPC ones starting on `intake`) until
/// shutdown, letting requests in flight finish, and dropping whatever is still open once
/// the grace period is over (the connections' tasks go with the worker's runtime; those of
/// a connection still new, on `intake`, go with the main runtime as the process exits).
fn worker(
    service: Arc<ServiceState>,
    (hub, hub_task): (HubHandle, Option<HubTask>),
    queues: WorkerQueues,
    (intake, shutdown): (tokio::runtime::Handle, Shutdown),
    ready: oneshot::Sender<()>,
) -> Job {
    Box::new(move || {
        Box::pin(async move {
            if let Some(task) = hub_task {
                task.spawn(&intake);
            }
            let front = Arc::new(Front::for_this_worker(service).await);
            let _ = ready.send(());
            tokio::select! {
                () = serve_front(front, hub, queues, intake, shutdown.clone()) => {}
                () = shutdown.forced() => {}
            }
            Ok(())
        })
    })
}

/// Serves `front` on the HTTP, gRPC and RESP connections of `queues` until shutdown, new
/// gRPC connections starting on `intake`.
async fn serve_front(
    front: Arc<Front>,
    hub: HubHandle,
    queues: WorkerQueues,
    intake: tokio::runtime::Handle,
    shutdown: Shutdown,
) {
    let WorkerQueues { http, grpc, resp } = queues;
    let settings = &front.service.settings;
    let bounds = &settings.bounds();
    let api = MakeApi::new(Arc::clone(&front), http::router(Arc::clone(&front)));
    let timeouts = Timeouts { idle: settings.idle_timeout, head: bounds.header_timeout };
    let served_http = http::serve(http, api, timeouts, bounds, shutdown.clone());
    let rls = RateLimitServiceServer::new(RateLimitGrpc::new(Arc::clone(&front)))
        .max_decoding_message_size(bounds.max_grpc_message);
    let limits = MessageLimits { timeout: settings.grpc_message_timeout, max_message: bounds.max_grpc_message };
    let rlqs = RlqsServer::new(RateLimitQuotaGrpc::new(hub), bounds.max_grpc_message);
    let services = tower::ServiceBuilder::new()
        .layer(crate::grpc::CallDeadlineLayer)
        .layer(crate::grpc::LogUnknownCalls::default())
        .layer(MessageDeadlineLayer::new(limits))
        .service(tonic::service::Routes::new(rls).add_service(rlqs).prepare());
    let http2 = Http2Settings {
        max_streams: u32::try_from(settings.grpc_max_streams).unwrap_or(u32::MAX),
        keepalive: settings.grpc_keepalive,
        keepalive_timeout: settings.grpc_keepalive_timeout(),
        max_header_list: u32::try_from(bounds.max_request_head).unwrap_or(u32::MAX),
    };
    let served_grpc = grpc::server::serve(grpc, services, http2, timeouts, intake, shutdown.clone());
    let served_resp = async {
        if let Some(queue) = resp {
            crate::resp::serve(queue, Arc::clone(&front), timeouts, shutdown.clone()).await;
        }
    };
    tokio::join!(served_http, served_grpc, served_resp);
}

/// The log filter without `RUST_LOG`: `info`, but only errors from redis-rs's Cluster
/// client, whose warnings repeat for every connection and retry while a node is down
/// (hundreds per failover); the store logs each master's outage once, at its start and at
/// its end.
const DEFAULT_LOG_FILTER: &str = "info,redis::cluster_handling=error";

fn init_logs(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    let colours = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(colours);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

#[cfg(test)]
mod tests;
