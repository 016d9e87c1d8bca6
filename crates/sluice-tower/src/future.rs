//! The future of a [`RateLimit`](crate::RateLimit) service's response.

use crate::headers::AllowedFields;
use http::Response;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

/// A boxed answer, for checks that wait on a store or on a shaping delay.
type Boxed<B, E> = Pin<Box<dyn Future<Output = Result<Response<B>, E>> + Send>>;

pin_project! {
    /// The response of a rate-limited request: the inner service's, with rate-limit
    /// fields, or the layer's own answer.
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        state: State<F, B, E>,
    }
}

pin_project! {
    #[project = StateProjection]
    enum State<F, B, E> {
        /// Decided at once and allowed: the inner service's future, and the fields to add.
        Inner { #[pin] future: F, fields: Option<AllowedFields> },
        /// Decided at once and answered by the layer.
        Ready { response: Option<Response<B>> },
        /// Waiting on the store or a shaping delay.
        Boxed { future: Boxed<B, E> },
    }
}

impl<F, B, E> ResponseFuture<F, B, E> {
    #[inline(always)]
    pub(crate) fn inner(future: F, fields: Option<AllowedFields>) -> Self {
        ResponseFuture { state: State::Inner { future, fields } }
    }

    pub(crate) fn ready(response: Response<B>) -> Self {
        ResponseFuture { state: State::Ready { response: Some(response) } }
    }

    pub(crate) fn boxed(future: impl Future<Output = Result<Response<B>, E>> + Send + 'static) -> Self {
        ResponseFuture { state: State::Boxed { future: Box::pin(future) } }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            // Without fields the inner answer passes through untouched (no move of the
            // response through this frame: it is a few hundred bytes).
            StateProjection::Inner { future, fields } if fields.is_none() => future.poll(cx),
            StateProjection::Inner { future, fields } => {
                let response = ready!(future.poll(cx))?;
                Poll::Ready(Ok(with_fields(response, fields.take())))
            }
            StateProjection::Ready { response } => match response.take() {
                Some(response) => Poll::Ready(Ok(response)),
                None => Poll::Pending,
            },
            StateProjection::Boxed { future } => future.as_mut().poll(cx),
        }
    }
}

/// The inner service's response with the rate-limit fields added.
pub(crate) fn with_fields<B>(mut response: Response<B>, fields: Option<AllowedFields>) -> Response<B> {
    if let Some(fields) = fields {
        fields.insert_into(response.headers_mut());
    }
    response
}

impl<F, B, E> fmt::Debug for ResponseFuture<F, B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
