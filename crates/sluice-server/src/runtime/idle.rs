//! Closing connections that stop sending requests: HTTP connections, and gRPC connections
//! with no stream open.
//!
//! `axum::serve` sets no timeout at all: a client that opens connections and sends its
//! request heads slowly, or never, holds them open for good (slowloris). hyper's own
//! `header_read_timeout` arms and cancels a timer on every request: about 1 700 more
//! instructions per check (callgrind), 7 % of a check's. Here a connection counts the
//! requests it sends and those in flight ([`crate::runtime::activity`]), and a watchdog
//! task per connection, waking every quarter of the timeout, closes the connection once it
//! has had no request in flight and no new one for a whole timeout (`idle_timeout`). An
//! HTTP request is in flight from its complete head until its response is produced, so a
//! request's own deadlines (the body's, 408) always answer first; a gRPC stream is in
//! flight while its request is open. Being a task of its own, the watchdog adds nothing to
//! the connection's polls. It also closes its connection at once when the listener, full,
//! asks it to make room.
//!
//! A request head that has begun and not come in full is held to a shorter timeout, the
//! header timeout: the connection's socket ([`crate::http::watched`]) notes bytes read while
//! no request is in flight, and a request's head completing clears the note. So a slow or
//! unfinished head is closed after seconds, while an idle keep-alive connection is kept for
//! the whole idle timeout. The watchdog then looks four times per header timeout.

use crate::runtime::activity::Activity;
use std::future::Future;
use std::pin::pin;
use std::time::Duration;

/// Once shutdown has begun, how long a connection with no request in flight may stay (to
/// finish writing a response) before it is closed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

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
    /// Its listener was full and it was the connection to go (idle the longest, or of a
    /// client over its share): closed to make room for a new one
    /// ([`crate::runtime::handoff::Slots`]).
    MadeRoom,
}

impl Ending {
    /// Whether the watchdog is to close the connection (it did not end by itself).
    pub(crate) fn closes(self) -> bool {
        self != Ending::ByItself
    }
}

/// The time limits of a watched connection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    /// With no request in flight and no new one (the idle timeout).
    pub(crate) idle: Duration,
    /// From a request head's first bytes to its end (the header timeout); a begun head is
    /// also held to the idle timeout, if shorter.
    pub(crate) head: Duration,
}

/// Watches a connection until `ended` completes (it closed); returns how it is to end
/// once it has had no request in flight and no new request for `timeouts.idle`, or a begun
/// head for `timeouts.head` (noticed within a quarter of the shorter timeout after that),
/// or for [`SHUTDOWN_GRACE`] once `shutdown` has completed, or at once when its listener
/// asks it to make room. The caller then closes it, unless it ended [`Ending::ByItself`].
pub(crate) async fn close_when_idle(
    activity: &Activity,
    timeouts: Timeouts,
    ended: impl Future<Output = ()>,
    shutdown: impl Future<Output = ()>,
) -> Ending {
    let (mut ended, mut shutdown) = (pin!(ended), pin!(shutdown));
    let (mut limits, mut stopping) = (timeouts, false);
    let mut looks = Looks::new(activity);
    loop {
        let period = (limits.idle.min(limits.head) / 4).max(Duration::from_millis(1));
        tokio::select! {
            () = &mut ended => return Ending::ByItself,
            () = activity.closed() => return Ending::MadeRoom,
            () = &mut shutdown, if !stopping => {
                (limits.idle, stopping) = (limits.idle.min(SHUTDOWN_GRACE), true);
                continue;
            }
            () = tokio::time::sleep(period) => {}
        }
        if let Some(ending) = looks.look(activity, period, limits) {
            return if stopping { Ending::AtShutdown } else { ending };
        }
    }
}

/// A connection's task, as a future that completes when it ends, whichever way.
pub(crate) async fn task_end(task: &mut tokio::task::JoinHandle<()>) {
    let _ = task.await;
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
    use std::sync::Arc;
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
            _ = close_when_idle(&activity, IDLE_ONLY, task_end(&mut connection), pending()) => panic!("closed while requests kept coming"),
        }
        assert!(!connection.is_finished());
        let quiet_from = Instant::now();
        assert_eq!(close_when_idle(&activity, IDLE_ONLY, task_end(&mut connection), pending()).await, Ending::Idle);
        let waited = quiet_from.elapsed();
        assert!(waited >= TIMEOUT && waited < TIMEOUT * 3, "closed after {waited:?}");
        assert!(!connection.is_finished(), "the caller closes it");
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_keeps_its_connection_however_long_it_takes() {
        let activity = Arc::new(Activity::default());
        let mut connection = tokio::spawn(pending());
        let slow_request = activity.begin();
        let watched = close_when_idle(&activity, IDLE_ONLY, task_end(&mut connection), pending());
        let outcome = tokio::time::timeout(TIMEOUT * 4, watched).await;
        assert!(outcome.is_err(), "closed with a request in flight");
        drop(slow_request);
        assert_eq!(close_when_idle(&activity, IDLE_ONLY, task_end(&mut connection), pending()).await, Ending::Idle);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_closes_a_connection_without_a_request_in_flight_after_the_grace() {
        let activity = Arc::new(Activity::default());
        let mut connection = tokio::spawn(pending());
        let started = Instant::now();
        let ending = close_when_idle(&activity, HOURS, task_end(&mut connection), async {}).await;
        assert_eq!(ending, Ending::AtShutdown);
        let waited = started.elapsed();
        assert!(waited >= SHUTDOWN_GRACE && waited < SHUTDOWN_GRACE * 2, "closed after {waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_asked_to_make_room_ends_at_once() {
        let activity = Arc::new(Activity::default());
        let mut connection = tokio::spawn(pending());
        activity.close();
        let started = Instant::now();
        let ending = close_when_idle(&activity, HOURS, task_end(&mut connection), pending()).await;
        assert_eq!((ending, started.elapsed()), (Ending::MadeRoom, Duration::ZERO));
    }

    #[tokio::test]
    async fn the_watchdog_ends_with_its_connection() {
        let mut connection = tokio::spawn(async {});
        let activity = Activity::default();
        let ending = close_when_idle(&activity, HOURS, task_end(&mut connection), pending()).await;
        assert_eq!(ending, Ending::ByItself);
    }

    #[tokio::test(start_paused = true)]
    async fn a_begun_head_is_closed_after_the_header_timeout_and_an_idle_connection_is_not() {
        let timeouts = Timeouts { idle: Duration::from_secs(60), head: TIMEOUT };
        let activity = Arc::new(Activity::default());
        let mut connection = tokio::spawn(pending());
        let idle = tokio::time::timeout(
            TIMEOUT * 10,
            close_when_idle(&activity, timeouts, task_end(&mut connection), pending()),
        );
        assert!(idle.await.is_err(), "an idle connection is held to the idle timeout only");
        activity.bytes_came();
        let head_from = Instant::now();
        assert_eq!(close_when_idle(&activity, timeouts, task_end(&mut connection), pending()).await, Ending::SlowHead);
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
        let watched = close_when_idle(&activity, timeouts, task_end(&mut connection), pending());
        assert!(tokio::time::timeout(TIMEOUT * 10, watched).await.is_err(), "closed as a slow head");
    }
}
