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
//!
//! A request head that has begun and not come in full is held to a shorter timeout, the
//! header timeout: the connection's socket ([`crate::http::watched`]) notes bytes read while
//! no request is in flight, and a request's head completing clears the note. So a slow or
//! unfinished head is closed after seconds, while an idle keep-alive connection is kept for
//! the whole request timeout. The watchdog then looks four times per header timeout.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// Bytes came while no request was in flight, and no request head has completed since:
    /// a head has begun.
    head_begun: AtomicBool,
}

impl Activity {
    /// Counts a request whose head came in full; it is in flight until the returned guard
    /// is dropped (with its response future).
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.head_begun.store(false, Ordering::Relaxed);
        InFlight(Arc::clone(self))
    }

    /// Notes that bytes came from the client: a request head has begun, unless a request
    /// is in flight (then they are its body).
    pub(crate) fn bytes_came(&self) {
        if self.in_flight() == 0 {
            self.head_begun.store(true, Ordering::Relaxed);
        }
    }

    fn head_begun(&self) -> bool {
        self.head_begun.load(Ordering::Relaxed)
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
    /// A request head began and did not come in full within the header timeout.
    SlowHead,
    /// Shutdown began, it had no request in flight for the grace period, and was closed.
    AtShutdown,
}

/// The time limits of a watched connection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    /// With no request in flight and no new one (the request timeout).
    pub(crate) idle: Duration,
    /// From a request head's first bytes to its end (the header timeout); a begun head is
    /// also held to the idle timeout, if shorter.
    pub(crate) head: Duration,
}

/// Watches `connection`, the task serving a connection, until it ends; aborts it once it
/// has had no request in flight and no new request for `timeouts.idle`, or a begun head
/// for `timeouts.head` (noticed within a quarter of the shorter timeout after that), or for
/// [`SHUTDOWN_GRACE`] once `shutdown` has completed.
pub(crate) async fn close_when_idle(
    activity: &Activity,
    timeouts: Timeouts,
    connection: &mut JoinHandle<()>,
    shutdown: impl Future<Output = ()>,
) -> Ending {
    let mut shutdown = pin!(shutdown);
    let (mut limits, mut stopping) = (timeouts, false);
    let mut looks = Looks::new(activity);
    loop {
        let period = (limits.idle.min(limits.head) / 4).max(Duration::from_millis(1));
        tokio::select! {
            _ = &mut *connection => return Ending::ByItself,
            () = &mut shutdown, if !stopping => {
                (limits.idle, stopping) = (limits.idle.min(SHUTDOWN_GRACE), true);
                continue;
            }
            () = tokio::time::sleep(period) => {}
        }
        if let Some(ending) = looks.look(activity, period, limits) {
            connection.abort();
            return if stopping { Ending::AtShutdown } else { ending };
        }
    }
}

/// What the watchdog saw at its past looks.
#[derive(Debug)]
struct Looks {
    /// Requests begun, at the last look.
    requests: u64,
    /// How long the connection has been seen idle; `None` when it was busy at the last look.
    idle_for: Option<Duration>,
    /// How long a begun head has been seen; `None` when there was none at the last look.
    head_for: Option<Duration>,
}

impl Looks {
    fn new(activity: &Activity) -> Looks {
        Looks { requests: activity.requests(), idle_for: None, head_for: None }
    }

    /// Looks at `activity`, `period` after the last look; how the connection is to end,
    /// if it is over `limits`.
    fn look(&mut self, activity: &Activity, period: Duration, limits: Timeouts) -> Option<Ending> {
        let requests = activity.requests();
        let busy = requests != self.requests || activity.in_flight() > 0;
        self.requests = requests;
        let longer = |seen: Option<Duration>| Some(seen.map_or(Duration::ZERO, |seen| seen + period));
        self.idle_for = if busy { None } else { longer(self.idle_for) };
        self.head_for = if busy || !activity.head_begun() { None } else { longer(self.head_for) };
        if self.head_for.is_some_and(|head| head >= limits.head) {
            return Some(Ending::SlowHead);
        }
        self.idle_for.is_some_and(|idle| idle >= limits.idle).then_some(Ending::Idle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::pending;
    use tokio::time::Instant;

    const TIMEOUT: Duration = Duration::from_millis(200);
    /// The idle timeout [`TIMEOUT`], and a header timeout that never comes first.
    const IDLE_ONLY: Timeouts = Timeouts { idle: TIMEOUT, head: Duration::from_secs(3600) };
    const HOURS: Timeouts = Timeouts { idle: Duration::from_secs(3600), head: Duration::from_secs(3600) };

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
            _ = close_when_idle(&activity, IDLE_ONLY, &mut connection, pending()) => panic!("closed while requests kept coming"),
        }
        assert!(!connection.is_finished());
        let quiet_from = Instant::now();
        assert_eq!(close_when_idle(&activity, IDLE_ONLY, &mut connection, pending()).await, Ending::Idle);
        let waited = quiet_from.elapsed();
        assert!(waited >= TIMEOUT && waited < TIMEOUT * 3, "closed after {waited:?}");
        assert!(connection.await.unwrap_err().is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_keeps_its_connection_however_long_it_takes() {
        let activity = Arc::new(Activity::default());
        let mut connection = tokio::spawn(pending());
        let slow_request = activity.begin();
        let watched = close_when_idle(&activity, IDLE_ONLY, &mut connection, pending());
        let outcome = tokio::time::timeout(TIMEOUT * 4, watched).await;
        assert!(outcome.is_err(), "closed with a request in flight");
        drop(slow_request);
        assert_eq!(close_when_idle(&activity, IDLE_ONLY, &mut connection, pending()).await, Ending::Idle);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_closes_a_connection_without_a_request_in_flight_after_the_grace() {
        let activity = Arc::new(Activity::default());
        let mut connection = tokio::spawn(pending());
        let started = Instant::now();
        let ending = close_when_idle(&activity, HOURS, &mut connection, async {}).await;
        assert_eq!(ending, Ending::AtShutdown);
        let waited = started.elapsed();
        assert!(waited >= SHUTDOWN_GRACE && waited < SHUTDOWN_GRACE * 2, "closed after {waited:?}");
    }

    #[tokio::test]
    async fn the_watchdog_ends_with_its_connection() {
        let mut connection = tokio::spawn(async {});
        let activity = Activity::default();
        let ending = close_when_idle(&activity, HOURS, &mut connection, pending()).await;
        assert_eq!(ending, Ending::ByItself);
    }

    #[tokio::test(start_paused = true)]
    async fn a_begun_head_is_closed_after_the_header_timeout_and_an_idle_connection_is_not() {
        let timeouts = Timeouts { idle: Duration::from_secs(60), head: TIMEOUT };
        let activity = Arc::new(Activity::default());
        let mut connection = tokio::spawn(pending());
        let idle = tokio::time::timeout(TIMEOUT * 10, close_when_idle(&activity, timeouts, &mut connection, pending()));
        assert!(idle.await.is_err(), "an idle connection is held to the idle timeout only");
        activity.bytes_came();
        let head_from = Instant::now();
        assert_eq!(close_when_idle(&activity, timeouts, &mut connection, pending()).await, Ending::SlowHead);
        let waited = head_from.elapsed();
        assert!(waited >= TIMEOUT && waited < TIMEOUT * 3, "closed after {waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_that_completes_clears_the_header_timeout_and_a_body_does_not_start_one() {
        let timeouts = Timeouts { idle: Duration::from_secs(60), head: TIMEOUT };
        let activity = Arc::new(Activity::default());
        let mut connection = tokio::spawn(pending());
        activity.bytes_came();
        let request = activity.begin();
        activity.bytes_came(); // the body, while the request is in flight
        drop(request);
        let watched = close_when_idle(&activity, timeouts, &mut connection, pending());
        assert!(tokio::time::timeout(TIMEOUT * 10, watched).await.is_err(), "closed as a slow head");
    }
}
