//! `sluice serve`: wires the store, the engine, the front ends and the background tasks.

use crate::backend::Backend;
use crate::cli_serve::ServeArgs;
use crate::engine::Engine;
use crate::handoff::{Handoff, Queue};
use crate::http::MakeApi;
use crate::metrics::Metrics;
use crate::rls::{RateLimitGrpc, RateLimitServiceServer};
use crate::service::Service;
use crate::service_config::{BUILTIN, ServiceConfig};
use crate::settings::Settings;
use crate::shutdown::Shutdown;
use crate::workers::{Job, Workers};
use crate::{http, reload, snapshot};
use anyhow::Context;
use axum::Router;
use sluice::Limit;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Runs the service until SIGTERM or SIGINT.
pub(crate) fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let config = match &args.config {
        Some(path) => ServiceConfig::load(path)?,
        None => ServiceConfig::parse(BUILTIN).context("the built-in configuration")?,
    };
    let settings = Settings::resolve(args, &config.server)
        .map_err(|problems| anyhow::anyhow!("invalid settings:\n  {}", problems.join("\n  ")))?;
    init_logs(settings.json_logs);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve(settings, config, args))
}

async fn serve(settings: Settings, config: ServiceConfig, args: &ServeArgs) -> anyhow::Result<()> {
    let backend = Backend::open(&settings).await?;
    if let (Some(path), Some(store)) = (&settings.snapshot, backend.memory()) {
        let limits: Vec<Limit> = config.limits().cloned().collect();
        snapshot::load(path, store, &limits, settings.discard_bad_snapshot)?;
    }
    let engine = Engine::new(backend, config, Metrics::new(), settings.shadow_mode);
    let service = Arc::new(Service::new(engine, settings, args.config.clone()));
    let http_listener = bind(service.settings.http, "HTTP").await?;
    let grpc_listener = bind(service.settings.grpc, "gRPC").await?;
    // Signal handlers first: once the addresses are printed, signals must find them.
    let shutdown = Shutdown::on_signals();
    reload::on_sighup(Arc::clone(&service));
    announce(&service, &http_listener, &grpc_listener)?;
    tokio::spawn(reload::on_file_change(Arc::clone(&service)));
    if service.settings.snapshot.is_some() && service.engine.backend().memory().is_some() {
        tokio::spawn(snapshot::run_periodically(Arc::clone(&service)));
    }
    serve_connections(&service, [http_listener, grpc_listener], &shutdown).await?;
    if snapshot::save_now(&service).await {
        tracing::info!("stopped");
    }
    Ok(())
}

/// Accepts on `[http, grpc]` and serves on the workers until shutdown; waits for the
/// requests in flight.
async fn serve_connections(
    service: &Arc<Service>,
    [http, grpc]: [TcpListener; 2],
    shutdown: &Shutdown,
) -> anyhow::Result<()> {
    let count = service.settings.workers;
    let (http_handoff, http_queues) = Handoff::new(count);
    let (grpc_handoff, grpc_queues) = Handoff::new(count);
    let router = http::router(Arc::clone(service));
    let jobs = http_queues.into_iter().zip(grpc_queues);
    let jobs = jobs.map(|(http, grpc)| worker(router.clone(), Arc::clone(service), http, grpc, shutdown.clone()));
    let workers = Workers::start(jobs.collect())?;
    tokio::join!(
        http_handoff.accept(http, shutdown.clone().wait()),
        grpc_handoff.accept(grpc, shutdown.clone().wait()),
    );
    workers.wait().await
}

/// One worker's job: serve the HTTP and gRPC connections it is handed until shutdown,
/// letting requests in flight finish.
fn worker(router: Router, service: Arc<Service>, http: Queue, grpc: Queue, shutdown: Shutdown) -> Job {
    Box::new(move || {
        Box::pin(async move {
            service.engine.backend().connect_this_thread().await;
            let api = MakeApi::new(Arc::clone(&service), router);
            let http = http::serve(http, api, service.settings.request_timeout, shutdown.clone());
            let grpc = tonic::transport::Server::builder()
                .http2_keepalive_interval(service.settings.grpc_keepalive)
                .http2_keepalive_timeout(service.settings.grpc_keepalive_timeout())
                .add_service(RateLimitServiceServer::new(RateLimitGrpc::new(service)))
                .serve_with_incoming_shutdown(grpc.into_stream(), shutdown.wait());
            let ((), grpc) = tokio::join!(http, grpc);
            grpc.context("gRPC server")
        })
    })
}

async fn bind(address: SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(address).await.with_context(|| format!("cannot listen for {what} on {address}"))
}

/// Prints where the service listens and what it serves (standard output, for people and scripts).
fn announce(service: &Service, http: &TcpListener, grpc: &TcpListener) -> anyhow::Result<()> {
    let loaded = service.engine.loaded();
    let source =
        service.config_path.as_ref().map_or_else(|| "built-in example".to_owned(), |p| p.display().to_string());
    println!("sluice {} serving {} policies from {source}", env!("CARGO_PKG_VERSION"), loaded.config.policies().len());
    for entry in loaded.config.policies() {
        let shadow = if entry.shadow { " (shadow mode)" } else { "" };
        println!(
            "  policy {}: {}, limit {}{shadow}",
            entry.limit.name(),
            entry.limit.policy().algorithm_name(),
            entry.limit.policy().limit()
        );
    }
    if let Some(rules) = loaded.config.envoy() {
        println!("Envoy rules: {} in domains {}", rules.len(), rules.domains().collect::<Vec<_>>().join(", "));
    }
    println!("store: {}", service.settings.store);
    println!("workers: {}", service.settings.workers);
    println!("HTTP listening on http://{}", http.local_addr()?);
    println!("gRPC listening on {}", grpc.local_addr()?);
    Ok(())
}

fn init_logs(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let colours = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(colours);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}
