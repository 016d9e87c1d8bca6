//! Closing HTTP connections that stop sending requests.
//!
//! `axum::serve` sets no timeout at all: a client that opens connections and sends its
//! request heads slowly, or never, holds them open for good (slowloris). hyper's own
//! `header_read_timeout` arms and cancels a timer on every request: about 1 700 more
//! instructions per check (callgrind), 7 % of a check's. Here a connection counts the
//! requests it sends and those in flight (a few atomic adds on the connection's own cache
//! line), and a watchdog task per connection, waking every quarter of the timeout, aborts
//! the connection's task (closing its socket) once it has had no request in flight and no
//! new one for a whole timeout. A request is in flight from its complete head until its
//! response is produced, so a request's own deadlines (the body's, 408) always answer
//! first. Being a task of its own, the watchdog adds nothing to the connection's polls.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::task::JoinHandle;

/// Once shutdown has begun, how long a connection with no request in flight may stay (to
/// finish writing a response) before it is closed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The requests of one connection.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    /// Requests whose head came in full, so far.
    requests: AtomicU64,
    /// Requests whose response is not produced yet.
    in_flight: AtomicU64,
}

impl Activity {
    /// Counts a request whose head came in full; it is in flight until the returned guard
    /// is dropped (with its response future).
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(self))
    }

    fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }
}

/// A request in flight; counted out when dropped.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How a watched connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Its task ended on its own (the client closed it, or hyper did).
    ByItself,
    /// It was idle for the whole timeout, and closed.
    Idle,
    /// Shutdown began, it had no request in flight for the grace period, and was closed.
    AtShutdown,
}

/// Watches `connection`, the task serving a connection, until it ends; aborts it once it
/// has had no request in flight and no new request for `timeout` (noticed within a quarter
/// of `timeout` after that), or for [`SHUTDOWN_GRACE`] once `shutdown` has completed.
pub(crate) async fn close_when_idle(
    activity: &Activity,
    timeout: Duration,
    connection: &mut JoinHandle<()>,
    shutdown: impl Future<Output = ()>,
) -> Ending {
    let mut shutdown = pin!(shutdown);
    let (mut limit, mut stopping) = (timeout, false);
    let mut seen = activity.requests();
    // How long the connection has been seen idle; `None` when it was busy at the last look.
    let mut idle_for: Option<Duration> = None;
    loop {
        let period = (limit / 4).max(Duration::from_millis(1));
        tokio::select! {
            _ = &mut *connection => return Ending::ByItself,
            () = &mut shutdown, if !stopping => {
                (limit, stopping) = (limit.min(SHUTDOWN_GRACE), true);
                continue;
            }
            () = tokio::time::sleep(period) => {}
        }
        let requests = activity.requests();
        let busy = requests != seen || activity.in_flight() > 0;
        seen = requests;
        idle_for = if busy { None } else { Some(idle_for.map_or(Duration::ZERO, |idle| idle + period)) };
        if idle_for.is_some_and(|idle| idle >= limit) {
            connection.abort();
            return if stopping { Ending::AtShutdown } else { Ending::Idle };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::pending;
    use tokio::time::Instant;

    const TIMEOUT: Duration = Duration::from_millis(200);

    // Time is paused in these tests (it moves on only when every task waits): the
    // watchdog's looks and the requests' pace are exact, whatever else the machine runs.
    #[tokio::test(start_paused = true)]
    async fn a_connection_is_closed_a_timeout_after_its_last_request_and_not_before() {
        let activity = Arc::new(Activity::default());
        let mut connection = tokio::spawn(pending());
        let busy = {
            let activity = Arc::clone(&activity);
            async move {
                for _ in 0..12 {
                    tokio::time::sleep(TIMEOUT / 4).await;
                    drop(activity.begin());
                }
            }
        };
        tokio::select! {
            () = busy => {}
            _ = close_when_idle(&activity, TIMEOUT, &mut connection, pending()) => panic!("closed while requests kept coming"),
        }
        assert!(!connection.is_finished());
        let quiet_from = Instant::now();
        assert_eq!(close_when_idle(&activity, TIMEOUT, &mut connection, pending()).await, Ending::Idle);
        let waited = quiet_from.elapsed();
        assert!(waited >= TIMEOUT && waited < TIMEOUT * 3, "closed after {waited:?}");
        assert!(connection.await.unwrap_err().is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_keeps_its_connection_however_long_it_takes() {
        let activity = Arc::new(Activity::default());
        let mut connection = tokio::spawn(pending());
        let slow_request = activity.begin();
        let watched = close_when_idle(&activity, TIMEOUT, &mut connection, pending());
        let outcome = tokio::time::timeout(TIMEOUT * 4, watched).await;
        assert!(outcome.is_err(), "closed with a request in flight");
        drop(slow_request);
        assert_eq!(close_when_idle(&activity, TIMEOUT, &mut connection, pending()).await, Ending::Idle);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_closes_a_connection_without_a_request_in_flight_after_the_grace() {
        let activity = Arc::new(Activity::default());
        let mut connection = tokio::spawn(pending());
        let started = Instant::now();
        let ending = close_when_idle(&activity, Duration::from_secs(3600), &mut connection, async {}).await;
        assert_eq!(ending, Ending::AtShutdown);
        let waited = started.elapsed();
        assert!(waited >= SHUTDOWN_GRACE && waited < SHUTDOWN_GRACE * 2, "closed after {waited:?}");
    }

    #[tokio::test]
    async fn the_watchdog_ends_with_its_connection() {
        let mut connection = tokio::spawn(async {});
        let activity = Activity::default();
        let ending = close_when_idle(&activity, Duration::from_secs(3600), &mut connection, pending()).await;
        assert_eq!(ending, Ending::ByItself);
    }
}
