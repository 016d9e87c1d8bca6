//! A worker's gRPC server: its services over HTTP/2 (hyper), each connection holding its
//! listener's slot and watched by its idle watchdog ([`GrpcSocket`]), its first moments
//! served on the intake runtime ([`crate::runtime::intake`]) so that a new Envoy is
//! answered at once while the worker is busy.
//!
//! What tonic's `transport::Server` would do, with the connections' tasks placed by
//! [`Home`] rather than on the runtime that accepts them: the requests carry their
//! connection ([`GrpcConnection`]) in their extensions, a service's error becomes a gRPC
//! status, and at shutdown each connection is asked to close (GOAWAY) and waited for. The
//! client's deadline (`grpc-timeout`) is kept by a layer of the services
//! ([`crate::grpc::CallDeadlineLayer`]).

use crate::grpc::connection::GrpcSocket;
use crate::runtime::handoff::Queue;
use crate::runtime::idle::Timeouts;
use crate::runtime::intake::Home;
use crate::runtime::shutdown::Shutdown;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::convert::Infallible;
use std::time::Duration;
use tokio::runtime::Handle;
use tonic::body::Body;
use tonic::codegen::http::{Request, Response};
use tonic::service::RecoverError;
use tower::{Service, ServiceExt};

/// The HTTP/2 settings of the gRPC listener's connections.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Http2Settings {
    /// Streams a connection may have open at once.
    pub(crate) max_streams: u32,
    /// How often an idle connection is pinged; `None`: never.
    pub(crate) keepalive: Option<Duration>,
    /// How long a ping may go unanswered before the connection is closed; `None`:
    /// hyper's default (20 s).
    pub(crate) keepalive_timeout: Option<Duration>,
    /// The largest header list a request may send, in bytes.
    pub(crate) max_header_list: u32,
}

/// Serves `services` on the gRPC connections handed to this worker until shutdown begins
/// or the listener stops, each connection's first moments on `intake`; then asks each
/// open connection to close and waits for them (the worker bounds the wait).
pub(crate) async fn serve<S>(
    mut queue: Queue,
    services: S,
    http2: Http2Settings,
    timeouts: Timeouts,
    intake: Handle,
    shutdown: Shutdown,
) where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let worker = Handle::current();
    let connections = GracefulShutdown::new();
    loop {
        let Some(accepted) = queue.next_before(shutdown.clone().wait()).await else { break };
        let (peer, home) = (accepted.peer, Home::new(intake.clone(), worker.clone()));
        let socket = GrpcSocket::watched(accepted, home.clone(), timeouts);
        let connection = socket.connection().clone();
        let services = RecoverError::new(services.clone()).map_request(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(connection.clone());
            request.map(Body::new)
        });
        let served = builder(http2, home.clone())
            .serve_connection(TokioIo::new(socket), TowerToHyperService::new(services))
            .into_owned();
        let served = connections.watch(served);
        home.spawn_connection(async move {
            if let Err(error) = served.await {
                tracing::debug!(%error, %peer, "gRPC connection ended with an error");
            }
        });
    }
    connections.shutdown().await;
}

/// hyper's HTTP/2-only connection builder with `http2`, its streams' tasks placed by `home`;
/// otherwise as tonic's server sets it (no bound on the streams a connection's errors
/// reset).
fn builder(http2: Http2Settings, home: Home) -> auto::Builder<Home> {
    let mut builder = auto::Builder::new(home).http2_only();
    let mut settings = builder.http2();
    settings
        .timer(TokioTimer::new())
        .max_concurrent_streams(http2.max_streams)
        .keep_alive_interval(http2.keepalive)
        .max_header_list_size(http2.max_header_list)
        .max_local_error_reset_streams(None);
    if let Some(timeout) = http2.keepalive_timeout {
        settings.keep_alive_timeout(timeout);
    }
    builder
}
