//! Closing HTTP connections that stop sending requests.
//!
//! `axum::serve` sets no timeout at all: a client that opens connections and sends its
//! request heads slowly, or never, holds them open for good (slowloris). hyper's own
//! `header_read_timeout` arms and cancels a timer on every request: about 1 700 more
//! instructions per check (callgrind), 7 % of a check's. Here a connection counts the
//! request heads it completes (an atomic add), and a watchdog task per connection, waking
//! every quarter of the timeout, aborts the connection's task (closing its socket) once a
//! whole timeout has gone by without a new one. Being a task of its own, the watchdog adds
//! nothing to the connection's polls.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

/// The requests one connection has sent so far.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    requests: AtomicU64,
}

impl Activity {
    /// Counts a request whose head came in full.
    pub(crate) fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

/// Aborts `connection`, the task serving a connection, once `activity` has counted no new
/// request for `timeout` (noticed within a quarter of `timeout` after that); true when it
/// did. Ends when the connection's task does.
pub(crate) async fn close_when_idle(activity: &Activity, timeout: Duration, connection: &mut JoinHandle<()>) -> bool {
    let period = (timeout / 4).max(Duration::from_millis(1));
    let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut seen = activity.requests();
    let mut quiet = Duration::ZERO;
    while quiet < timeout {
        tokio::select! {
            _ = &mut *connection => return false,
            _ = ticks.tick() => {}
        }
        let requests = activity.requests();
        quiet = if requests == seen { quiet + period } else { Duration::ZERO };
        seen = requests;
    }
    connection.abort();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_connection_is_closed_a_timeout_after_its_last_request_and_not_before() {
        let timeout = Duration::from_millis(200);
        let activity = Arc::new(Activity::default());
        let mut connection = tokio::spawn(std::future::pending());
        let busy = {
            let activity = Arc::clone(&activity);
            async move {
                for _ in 0..12 {
                    tokio::time::sleep(timeout / 4).await;
                    activity.request();
                }
            }
        };
        tokio::select! {
            () = busy => {}
            _ = close_when_idle(&activity, timeout, &mut connection) => panic!("closed while requests kept coming"),
        }
        assert!(!connection.is_finished());
        let quiet_from = Instant::now();
        assert!(close_when_idle(&activity, timeout, &mut connection).await);
        let waited = quiet_from.elapsed();
        assert!(waited >= timeout && waited < timeout * 3, "closed after {waited:?}");
        assert!(connection.await.unwrap_err().is_cancelled());
    }

    #[tokio::test]
    async fn the_watchdog_ends_with_its_connection() {
        let mut connection = tokio::spawn(async {});
        let activity = Activity::default();
        assert!(!close_when_idle(&activity, Duration::from_secs(3600), &mut connection).await);
    }
}
