//! A worker's RESP server: each connection handed to it is served on a task of its own
//! ([`connection::serve`]) and watched by [`close_when_idle`], as HTTP connections are: closed
//! once idle for the idle timeout, to make room when the listener is full, and at shutdown
//! once its command in flight is answered. Each keeps its listener's slot until it closes.

use crate::engine::front::Front;
use crate::resp::connection;
use crate::runtime::handoff::{Client, Connection, Queue};
use crate::runtime::idle::{Ending, Timeouts, close_when_idle, task_end};
use crate::runtime::shutdown::Shutdown;
use std::sync::Arc;
use tokio::task::JoinSet;

/// Serves the RESP connections handed to this worker until shutdown begins or the listener
/// stops, then waits for them to close.
pub(crate) async fn serve(mut queue: Queue, front: Arc<Front>, timeouts: Timeouts, shutdown: Shutdown) {
    // No head timeout: a command is small and bounded, and a slow one is idle time.
    let timeouts = Timeouts { head: timeouts.idle, ..timeouts };
    let mut watchdogs = JoinSet::new();
    loop {
        let Some(Connection { stream, peer, slot }) = queue.next_before(shutdown.clone().wait()).await else { break };
        let activity = Arc::clone(slot.activity());
        let served =
            connection::serve(Arc::clone(&front), stream, Client(peer), Arc::clone(&activity), shutdown.clone());
        let mut connection = tokio::spawn(served);
        let shutdown = shutdown.clone().wait();
        watchdogs.spawn(async move {
            let ending = close_when_idle(&activity, timeouts, task_end(&mut connection), shutdown).await;
            if ending.closes() {
                connection.abort();
            }
            drop(slot);
            if ending != Ending::ByItself {
                tracing::debug!(%peer, ?ending, "closed a RESP connection");
            }
        });
        // Finished watchdogs are dropped as others come, so the set stays as large as the
        // connections open.
        while watchdogs.try_join_next().is_some() {}
    }
    while watchdogs.join_next().await.is_some() {}
}
