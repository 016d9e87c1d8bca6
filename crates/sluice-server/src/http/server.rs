//! A worker's HTTP server: hyper's connections (HTTP/1.1, and HTTP/2 for clients that
//! open with its preface), each watched by [`close_when_idle`], their request heads
//! bounded by `max_request_head`.

use crate::config::bounds::Bounds;
use crate::http::MakeApi;
use crate::http::watched::Watched;
use crate::runtime::handoff::{Client, Connection, Queue};
use crate::runtime::idle::{Ending, Timeouts, close_when_idle, task_end};
use crate::runtime::shutdown::Shutdown;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use std::net::SocketAddr;
use std::sync::Arc;

/// Serves the HTTP connections handed to this worker until shutdown begins or the
/// listener stops, then waits for them: idle ones close at once, those with a request in
/// flight once it is answered, the rest after a short grace. Each connection keeps its
/// listener's slot until it closes.
pub(crate) async fn serve(mut queue: Queue, api: MakeApi, timeouts: Timeouts, bounds: &Bounds, shutdown: Shutdown) {
    let builder = builder(bounds);
    let connections = GracefulShutdown::new();
    loop {
        let Some(Connection { stream, peer, slot }) = queue.next_before(shutdown.clone().wait()).await else { break };
        let activity = Arc::clone(slot.activity());
        let api = api.for_client(Client(peer), Arc::clone(&activity));
        let stream = Watched::new(stream, Arc::clone(&activity));
        let connection = builder.serve_connection(TokioIo::new(stream), api).into_owned();
        let connection = connections.watch(connection);
        let mut connection = tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, %peer, "HTTP connection ended with an error");
            }
        });
        let shutdown = shutdown.clone().wait();
        tokio::spawn(async move {
            let ending = close_when_idle(&activity, timeouts, task_end(&mut connection), shutdown).await;
            if ending.closes() {
                connection.abort();
            }
            drop(slot);
            log_closed(ending, peer, timeouts);
        });
    }
    connections.shutdown().await;
}

/// hyper's connection builder, with `bounds` on request heads: an HTTP/1 head over
/// `max_request_head` gets 431, an HTTP/2 header list over it is refused.
fn builder(bounds: &Bounds) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().max_buf_size(bounds.max_request_head);
    builder.http2().max_header_list_size(u32::try_from(bounds.max_request_head).unwrap_or(u32::MAX));
    builder
}

fn log_closed(ending: Ending, peer: SocketAddr, timeouts: Timeouts) {
    match ending {
        Ending::ByItself => {}
        Ending::Idle => {
            let idle_timeout = timeouts.idle;
            tracing::debug!(%peer, ?idle_timeout, "closed an HTTP connection idle for the idle timeout")
        }
        Ending::MadeRoom => {
            tracing::debug!(%peer, "closed an HTTP connection to make room: the listener was full")
        }
        Ending::SlowHead => {
            let header_timeout = timeouts.head;
            tracing::debug!(%peer, ?header_timeout, "closed an HTTP connection whose request head did not come in time")
        }
        Ending::AtShutdown => tracing::debug!(%peer, "closed an HTTP connection with no request in flight at shutdown"),
    }
}
