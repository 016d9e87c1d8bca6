//! A worker's HTTP server: hyper's connections (HTTP/1.1, and HTTP/2 for clients that
//! open with its preface), each watched by [`close_when_idle`].

use crate::handoff::{Client, Queue};
use crate::http::MakeApi;
use crate::http::idle::{Activity, Ending, close_when_idle};
use crate::shutdown::Shutdown;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Serves the HTTP connections handed to this worker until shutdown begins or the
/// listener stops, then waits for them: idle ones close at once, those with a request in
/// flight once it is answered, the rest after a short grace.
pub(crate) async fn serve(mut queue: Queue, api: MakeApi, request_timeout: Duration, shutdown: Shutdown) {
    let builder = auto::Builder::new(TokioExecutor::new());
    let connections = GracefulShutdown::new();
    loop {
        let next = tokio::select! {
            () = shutdown.clone().wait() => break,
            next = queue.next() => next,
        };
        let Some((stream, peer)) = next else { break };
        let activity = Arc::new(Activity::default());
        let api = api.for_client(Client(peer), Arc::clone(&activity));
        let connection = builder.serve_connection(TokioIo::new(stream), api).into_owned();
        let connection = connections.watch(connection);
        let mut connection = tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, %peer, "HTTP connection ended with an error");
            }
        });
        let shutdown = shutdown.clone().wait();
        tokio::spawn(async move {
            let ending = close_when_idle(&activity, request_timeout, &mut connection, shutdown).await;
            log_closed(ending, peer, request_timeout);
        });
    }
    connections.shutdown().await;
}

fn log_closed(ending: Ending, peer: SocketAddr, request_timeout: Duration) {
    match ending {
        Ending::ByItself => {}
        Ending::Idle => {
            tracing::debug!(%peer, ?request_timeout, "closed an HTTP connection idle for the request timeout")
        }
        Ending::AtShutdown => tracing::debug!(%peer, "closed an HTTP connection with no request in flight at shutdown"),
    }
}
