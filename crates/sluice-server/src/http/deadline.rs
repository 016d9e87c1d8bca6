//! Deadlines for what clients send.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

/// Awaits `future` for at most `limit`; `None` when the time ran out.
///
/// The future is polled once before any timer is set: a check's body nearly always came
/// with its head, and then no timer is registered (nor cancelled) at all.
pub(crate) async fn within<F: Future>(limit: Duration, future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    if let Poll::Ready(output) = poll_fn(|context| Poll::Ready(future.as_mut().poll(context))).await {
        return Some(output);
    }
    tokio::time::timeout(limit, future).await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_ready_future_beats_even_a_zero_limit_and_a_late_one_times_out() {
        assert_eq!(within(Duration::ZERO, async { 7 }).await, Some(7));
        let started = tokio::time::Instant::now();
        let late = tokio::time::sleep(Duration::from_secs(10));
        assert_eq!(within(Duration::from_millis(50), late).await, None);
        assert!(started.elapsed() < Duration::from_secs(5), "gave up at the limit");
        let in_time = tokio::time::sleep(Duration::from_millis(10));
        assert_eq!(within(Duration::from_secs(10), in_time).await, Some(()));
    }
}
