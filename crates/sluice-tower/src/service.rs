//! [`RateLimit`]: the service a [`RateLimitLayer`](crate::RateLimitLayer) wraps around another.

use crate::decide::{Decided, decide, decide_in_place};
use crate::future::{ResponseFuture, with_fields};
use crate::key::RequestKey;
use crate::outcome::{Outcome, outcome};
use crate::response::LayerBody;
use crate::shared::Shared;
use http::request::Parts;
use http::{Request, Response};
use sluice_core::{Clock, Store};
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::Service;

/// A service that rate-limits requests before handing them to `inner`.
///
/// Readiness is the inner service's: `poll_ready` never waits on the limiter. The decision
/// is made in `call`, so every request gets an answer at once (or after its shaping delay)
/// instead of queueing.
pub struct RateLimit<T, S, C> {
    inner: T,
    shared: Arc<Shared<S, C>>,
}

impl<T, S, C> RateLimit<T, S, C> {
    pub(crate) fn new(inner: T, shared: Arc<Shared<S, C>>) -> Self {
        RateLimit { inner, shared }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// The inner service, without the rate limiting.
    pub fn into_inner(self) -> T {
        self.inner
    }
}

impl<T: Clone, S, C> Clone for RateLimit<T, S, C> {
    fn clone(&self) -> Self {
        RateLimit { inner: self.inner.clone(), shared: Arc::clone(&self.shared) }
    }
}

impl<T: std::fmt::Debug, S: std::fmt::Debug, C: std::fmt::Debug> std::fmt::Debug for RateLimit<T, S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit").field("inner", &self.inner).field("layer", &self.shared).finish()
    }
}

/// What a [`RateLimit`] needs of the service it wraps and of its response body: the
/// bounds of its `Service` impl, written once for the methods that call the inner
/// service (a trait alias: every service with those bounds has it).
pub(crate) trait Inner<ReqBody>:
    Service<Request<ReqBody>, Response = Response<Self::Body>, Future: Send> + Clone + Send + 'static
{
    /// The response body, in which the layer writes its own answers.
    type Body: LayerBody;
}

impl<T, ReqBody, ResBody> Inner<ReqBody> for T
where
    T: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    T::Future: Send,
    ResBody: LayerBody,
{
    type Body = ResBody;
}

/// The response future of a [`RateLimit`] around `T`.
type Answer<T, B> =
    ResponseFuture<<T as Service<Request<B>>>::Future, <T as Inner<B>>::Body, <T as Service<Request<B>>>::Error>;

impl<T, S, C, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<T, S, C>
where
    T: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    T::Future: Send,
    S: Store,
    C: Clock,
    ReqBody: Send + 'static,
    ResBody: LayerBody,
{
    type Response = Response<ResBody>;
    type Error = T::Error;
    type Future = ResponseFuture<T::Future, ResBody, T::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The usual case on the shortest path: decided from the head in place, without
        // taking the request apart (only a cost function or an extractor that needs the
        // whole head makes the layer do that). Deciding out of line keeps this function
        // small enough to be inlined into its caller, which then builds this response
        // future in its own frame rather than receiving a copy of it.
        match decide_in_place(&self.shared, request.headers(), request.extensions()) {
            Some(decided) => self.follow(decided, request),
            None => self.call_with_head(request),
        }
    }
}

impl<T, S: Store, C: Clock> RateLimit<T, S, C> {
    /// Carries out a decision. An allowed request's fields are rendered after the inner
    /// call, from the verdict (plain data), so that nothing that must be dropped is alive
    /// across that call.
    #[inline(always)]
    fn follow<B: Send + 'static>(&mut self, decided: Decided, request: Request<B>) -> Answer<T, B>
    where
        T: Inner<B>,
    {
        match decided {
            Decided::Allowed(verdict) => {
                let future = self.inner.call(request);
                ResponseFuture::inner(future, self.shared.allowed_fields(&verdict))
            }
            Decided::Now(outcome) => self.decided(request, outcome),
            Decided::Later(key, cost) => self.later(request, key, cost),
        }
    }

    /// [`call`](Service::call) for requests that must be taken apart to be keyed or
    /// costed: the same decision, from the key and cost the head gives.
    #[inline(never)]
    fn call_with_head<B: Send + 'static>(&mut self, request: Request<B>) -> Answer<T, B>
    where
        T: Inner<B>,
    {
        let (parts, body) = request.into_parts();
        let key = self.shared.key.extract(&parts);
        let cost = self.shared.cost.as_ref().map_or(1, |cost| cost(&parts));
        let decided = decide(&self.shared, key.as_ref().map(RequestKey::as_bytes), cost);
        self.follow(decided, Request::from_parts(parts, body))
    }

    /// Answers a request decided at once that does not simply proceed now.
    #[cold]
    #[inline(never)]
    fn decided<B: Send + 'static>(&mut self, request: Request<B>, outcome: Outcome) -> Answer<T, B>
    where
        T: Inner<B>,
    {
        let (parts, body) = request.into_parts();
        self.answer(outcome, parts, body)
    }

    /// Checks a request on a store that must be awaited, then answers.
    #[inline(never)]
    fn later<B: Send + 'static>(&mut self, request: Request<B>, key: RequestKey, cost: u64) -> Answer<T, B>
    where
        T: Inner<B>,
    {
        let (parts, body) = request.into_parts();
        let (shared, inner) = (Arc::clone(&self.shared), self.take_ready_inner());
        ResponseFuture::boxed(async move {
            let outcome = outcome(&shared, shared.check(&key, cost).await);
            carry_out(&shared, inner, outcome, parts, body).await
        })
    }

    /// Carries out an outcome decided in `call`: the layer or the ready inner service
    /// answers at once, unless the request must first wait its turn.
    fn answer<B: Send + 'static>(&mut self, outcome: Outcome, parts: Parts, body: B) -> Answer<T, B>
    where
        T: Inner<B>,
    {
        match outcome {
            Outcome::Refused(refusal) => {
                ResponseFuture::ready(refusal.answer(&self.shared, &parts).map(T::Body::from_rejection))
            }
            Outcome::Proceed { delay, fields } if delay.is_zero() => {
                ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), fields)
            }
            outcome => {
                let (shared, inner) = (Arc::clone(&self.shared), self.take_ready_inner());
                ResponseFuture::boxed(async move { carry_out(&shared, inner, outcome, parts, body).await })
            }
        }
    }

    /// The ready inner service, leaving a clone in its place (axum's advice for services
    /// that call their inner service from a future: the clone may not be ready).
    fn take_ready_inner(&mut self) -> T
    where
        T: Clone,
    {
        let clone = self.inner.clone();
        std::mem::replace(&mut self.inner, clone)
    }
}

/// Answers, or waits out the shaping delay on the layer's clock and calls `inner`.
async fn carry_out<T, S, C, B>(
    shared: &Shared<S, C>,
    mut inner: T,
    outcome: Outcome,
    parts: Parts,
    body: B,
) -> Result<Response<T::Body>, T::Error>
where
    T: Inner<B>,
    C: Clock,
{
    match outcome {
        Outcome::Refused(refusal) => Ok(refusal.answer(shared, &parts).map(T::Body::from_rejection)),
        Outcome::Proceed { delay, fields } => {
            if !delay.is_zero() {
                shared.limiter.clock().sleep(delay).await;
            }
            let response = inner.call(Request::from_parts(parts, body)).await?;
            Ok(with_fields(response, fields))
        }
    }
}
