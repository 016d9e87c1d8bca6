//! What one connection is doing, shared by the connection, its idle watchdog
//! ([`crate::runtime::idle`]) and its listener's slots ([`crate::runtime::handoff::Slots`]).
//!
//! A connection counts the requests (HTTP) or streams (gRPC) it begins and those in flight,
//! a few atomic adds on its own cache line, and notes when the last one ended; the slots
//! read that to choose the connection to close when the listener is full, and ask it
//! to close ([`Activity::close`]).

use futures_util::task::AtomicWaker;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Context;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The requests of one connection, and whether it is asked to close.
#[derive(Debug)]
pub(crate) struct Activity {
    /// When the connection was accepted.
    opened: Instant,
    /// Requests whose head came in full, so far.
    requests: AtomicU64,
    /// Requests whose response is not produced yet (gRPC: streams whose request is open).
    in_flight: AtomicU64,
    /// When a request was last in flight, in microseconds after `opened`.
    last_busy: AtomicU64,
    /// Bytes came while no request was in flight, and no request head has completed since:
    /// a head has begun.
    head_begun: AtomicBool,
    /// Whether the connection is asked to close (to make room, or idle).
    closing: AtomicBool,
    /// Wakes the watchdog of a connection asked to close.
    close_requested: Notify,
    /// Wakes the task reading the connection's socket, for sockets that close themselves
    /// ([`Activity::poll_closing`]).
    reader: AtomicWaker,
}

impl Default for Activity {
    fn default() -> Activity {
        Activity::new(Instant::now())
    }
}

impl Activity {
    /// A connection accepted at `opened`, with no request yet.
    pub(crate) fn new(opened: Instant) -> Activity {
        Activity {
            opened,
            requests: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            last_busy: AtomicU64::new(0),
            head_begun: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            close_requested: Notify::new(),
            reader: AtomicWaker::new(),
        }
    }

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

    pub(crate) fn head_begun(&self) -> bool {
        self.head_begun.load(Ordering::Relaxed)
    }

    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Since when the connection has had no request in flight; `None` while it has one.
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        if self.in_flight() > 0 {
            return None;
        }
        Some(self.opened + Duration::from_micros(self.last_busy.load(Ordering::Relaxed)))
    }

    /// Asks the connection to close: its watchdog and its socket's reader are woken.
    pub(crate) fn close(&self) {
        self.closing.store(true, Ordering::Relaxed);
        self.close_requested.notify_one();
        self.reader.wake();
    }

    /// Completes once [`Activity::close`] is called (at once if it was).
    pub(crate) async fn closed(&self) {
        if !self.closing.load(Ordering::Relaxed) {
            self.close_requested.notified().await;
        }
    }

    /// Whether the connection is asked to close.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    /// Whether the connection is asked to close; if not, `context` is woken when it is.
    pub(crate) fn poll_closing(&self, context: &Context<'_>) -> bool {
        if self.closing.load(Ordering::Relaxed) {
            return true;
        }
        self.reader.register(context.waker());
        self.closing.load(Ordering::Relaxed)
    }
}

/// A request in flight; counted out when dropped.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        // Microseconds fit 584 000 years; the clock read is one vDSO call per request.
        let busy = u64::try_from(activity.opened.elapsed().as_micros()).unwrap_or(u64::MAX);
        activity.last_busy.fetch_max(busy, Ordering::Relaxed);
        activity.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_idle_since_its_last_request_ended() {
        let opened = Instant::now();
        let activity = Arc::new(Activity::new(opened));
        assert_eq!(activity.idle_since(), Some(opened), "idle since accepted");
        let request = activity.begin();
        assert_eq!(activity.idle_since(), None, "busy with a request");
        drop(request);
        let since = activity.idle_since().expect("idle again");
        assert!(since >= opened && since <= Instant::now());
    }

    #[tokio::test]
    async fn a_close_request_wakes_a_watchdog_that_waits_and_one_that_comes_later() {
        let activity = Arc::new(Activity::default());
        let waiting = tokio::spawn({
            let activity = Arc::clone(&activity);
            async move { activity.closed().await }
        });
        tokio::task::yield_now().await;
        activity.close();
        tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("woken").unwrap();
        tokio::time::timeout(Duration::from_secs(5), activity.closed()).await.expect("at once");
    }
}
