//! The client's deadline for a call (`grpc-timeout`, as the gRPC protocol over HTTP/2
//! defines it): a call not answered by then ends with `DEADLINE_EXCEEDED`, and its work
//! is dropped. tonic's server keeps it the same way; Sluice serves its connections with
//! hyper directly ([`crate::grpc::server`]), so it keeps it here.
//!
//! Only the call's answer is bounded, not a stream's life: a streaming call is answered
//! (its response begun) at once, and its stream goes on.

use futures_util::FutureExt;
use futures_util::future::{Either, Map};
use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Timeout;
use tokio::time::error::Elapsed;
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::http::{HeaderValue, Request, Response};
use tower::{Layer, Service};

/// A call's answer.
type Answered = Result<Response<Body>, Infallible>;

/// A call's answer, or `DEADLINE_EXCEEDED` once its deadline is over.
type Bounded<F> = Map<Timeout<F>, fn(Result<Answered, Elapsed>) -> Answered>;

/// The header a client states its deadline in.
const GRPC_TIMEOUT: &str = "grpc-timeout";

/// Ends each call that outlives its client's `grpc-timeout` with `DEADLINE_EXCEEDED`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CallDeadlineLayer;

impl<S> Layer<S> for CallDeadlineLayer {
    type Service = CallDeadline<S>;

    fn layer(&self, inner: S) -> CallDeadline<S> {
        CallDeadline { inner }
    }
}

/// The gRPC router, each call bounded by its client's deadline.
#[derive(Clone, Debug)]
pub(crate) struct CallDeadline<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for CallDeadline<S>
where
    S: Service<Request<B>, Response = Response<Body>, Error = Infallible>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Either<S::Future, Bounded<S::Future>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let deadline = request.headers().get(GRPC_TIMEOUT).and_then(timeout);
        let answer = self.inner.call(request);
        let Some(deadline) = deadline else { return Either::Left(answer) };
        let or_deadline_exceeded: fn(Result<Answered, Elapsed>) -> Answered = or_deadline_exceeded;
        Either::Right(tokio::time::timeout(deadline, answer).map(or_deadline_exceeded))
    }
}

/// The answer, or `DEADLINE_EXCEEDED` when the deadline came first.
fn or_deadline_exceeded(answer: Result<Answered, Elapsed>) -> Answered {
    answer.unwrap_or_else(|_| Ok(Status::deadline_exceeded("the call's grpc-timeout ran out").into_http()))
}

/// The duration a `grpc-timeout` value states: 1 to 8 digits and a unit (`H`, `M`, `S`,
/// `m`, `u`, `n`); `None` for anything else, which leaves the call unbounded.
fn timeout(value: &HeaderValue) -> Option<Duration> {
    let value = value.to_str().ok()?;
    let (digits, unit) = value.split_at_checked(value.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount * 3600),
        "M" => Duration::from_secs(amount * 60),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::future::BoxFuture;
    use proptest::prelude::*;

    fn parsed(value: &str) -> Option<Duration> {
        timeout(&HeaderValue::from_str(value).unwrap())
    }

    #[test]
    fn reads_each_unit_and_refuses_what_the_protocol_does_not_allow() {
        assert_eq!(parsed("20m"), Some(Duration::from_millis(20)));
        assert_eq!(parsed("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parsed("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parsed("99999999S"), Some(Duration::from_secs(99_999_999)));
        assert_eq!(parsed("7u"), Some(Duration::from_micros(7)));
        assert_eq!(parsed("0n"), Some(Duration::ZERO));
        for refused in ["", "m", "123456789m", "1.5S", "-1S", "10", "10s", "10 m", " 10m", "1é"] {
            assert_eq!(timeout(&HeaderValue::from_bytes(refused.as_bytes()).unwrap()), None, "{refused:?}");
        }
    }

    proptest! {
        #[test]
        fn any_header_value_is_read_without_panicking(bytes in proptest::collection::vec(0x20u8..0x7f, 0..16)) {
            let _ = timeout(&HeaderValue::from_bytes(&bytes).unwrap());
        }

        #[test]
        fn every_valid_value_is_read_exactly(amount in 0u64..100_000_000, unit in 0usize..6) {
            let (letter, nanos) = [("H", 3_600_000_000_000u128), ("M", 60_000_000_000), ("S", 1_000_000_000),
                ("m", 1_000_000), ("u", 1_000), ("n", 1)][unit];
            let stated = parsed(&format!("{amount}{letter}")).unwrap();
            prop_assert_eq!(stated.as_nanos(), u128::from(amount) * nanos);
        }
    }

    /// A service that never answers.
    #[derive(Clone, Debug)]
    struct Silent;

    impl Service<Request<()>> for Silent {
        type Response = Response<Body>;
        type Error = Infallible;
        type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_past_its_deadline_ends_with_deadline_exceeded_and_one_without_waits() {
        let mut service = CallDeadlineLayer.layer(Silent);
        let request = Request::builder().header(GRPC_TIMEOUT, "20m").body(()).unwrap();
        let response = service.call(request).await.unwrap();
        let status = Status::from_header_map(response.headers()).unwrap();
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        let unbounded = service.call(Request::new(()));
        assert!(
            tokio::time::timeout(Duration::from_secs(3600), unbounded).await.is_err(),
            "no deadline: still waiting"
        );
    }
}
