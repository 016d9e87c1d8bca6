//! The future of a [`RateLimit`](crate::RateLimit) service's response.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The response of a rate-limited request: the inner service's, with rate-limit fields,
/// or the layer's rejection.
pub struct ResponseFuture<R, E> {
    inner: Pin<Box<dyn Future<Output = Result<R, E>> + Send>>,
}

impl<R, E> ResponseFuture<R, E> {
    pub(crate) fn new(future: impl Future<Output = Result<R, E>> + Send + 'static) -> Self {
        ResponseFuture { inner: Box::pin(future) }
    }
}

impl<R, E> Future for ResponseFuture<R, E> {
    type Output = Result<R, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<R, E> fmt::Debug for ResponseFuture<R, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
