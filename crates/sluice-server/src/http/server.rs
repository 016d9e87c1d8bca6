//! A worker's HTTP server: hyper's HTTP/1 connections, closed when they stop sending
//! requests ([`close_when_idle`]).

use crate::handoff::{Client, Queue};
use crate::http::MakeApi;
use crate::http::idle::{Activity, close_when_idle};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

/// Serves the HTTP connections handed to this worker until `shutdown` completes or the
/// listener stops, then waits for the requests in flight (idle connections are closed).
pub(crate) async fn serve(
    mut queue: Queue,
    api: MakeApi,
    request_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let builder = http1::Builder::new();
    let connections = GracefulShutdown::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let next = tokio::select! {
            () = &mut shutdown => break,
            next = queue.next() => next,
        };
        let Some((stream, peer)) = next else { break };
        let activity = Arc::new(Activity::default());
        let api = api.for_client(Client(peer), Arc::clone(&activity));
        let connection = connections.watch(builder.serve_connection(TokioIo::new(stream), api));
        let mut connection = tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, %peer, "HTTP connection closed");
            }
        });
        tokio::spawn(async move {
            if close_when_idle(&activity, request_timeout, &mut connection).await {
                tracing::debug!(%peer, ?request_timeout, "closed an HTTP connection that sent no request");
            }
        });
    }
    connections.shutdown().await;
}
