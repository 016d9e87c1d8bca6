//! Deadlines for what clients send: the body's (`body_timeout`) and the whole request's
//! (`request_timeout`), each answered 408.

use crate::config::settings::Settings;
use axum::http::{HeaderValue, StatusCode, Version, header};
use axum::response::Response;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

/// A time limit on a request, and the setting it comes from (the 408's code names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deadline {
    pub(crate) limit: Duration,
    pub(crate) setting: &'static str,
}

impl Deadline {
    /// The whole request's: from its complete head to its answer.
    pub(crate) fn request(settings: &Settings) -> Deadline {
        Deadline { limit: settings.request_timeout, setting: "request_timeout" }
    }

    /// The body's, from the request's complete head: the body timeout, or the request
    /// timeout if that is shorter.
    pub(crate) fn body(settings: &Settings) -> Deadline {
        let body = Deadline { limit: settings.body_timeout, setting: "body_timeout" };
        let request = Deadline::request(settings);
        if request.limit < body.limit { request } else { body }
    }
}

/// `response`, closing its HTTP/1 connection when it is a 408 (RFC 9110, 15.5.9): the rest
/// of a late body may still come, and must not be read as the next request. HTTP/2 has no
/// `Connection` field: there the answer ends its stream only.
pub(crate) fn close_after_timeout(version: Version, mut response: Response) -> Response {
    if response.status() == StatusCode::REQUEST_TIMEOUT && version <= Version::HTTP_11 {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

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
    use crate::config::settings::{ServerSection, SettingFlags};

    #[test]
    fn a_body_waits_the_body_timeout_or_the_request_timeout_if_shorter() {
        let settings = |body: &str, request: &str| {
            let flags = SettingFlags {
                body_timeout: Some(body.into()),
                request_timeout: Some(request.into()),
                ..SettingFlags::default()
            };
            Settings::resolve(&flags, &ServerSection::default()).unwrap()
        };
        let body = Deadline::body(&settings("5s", "75s"));
        assert_eq!(body, Deadline { limit: Duration::from_secs(5), setting: "body_timeout" });
        let body = Deadline::body(&settings("5s", "1s"));
        assert_eq!(body, Deadline { limit: Duration::from_secs(1), setting: "request_timeout" });
    }

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
