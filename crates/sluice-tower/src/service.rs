//! [`RateLimit`]: the service a [`RateLimitLayer`](crate::RateLimitLayer) wraps around another.

use crate::future::{ResponseFuture, with_fields};
use crate::judge::{Judgement, forward, judge, missing_key, or_shared_key, request_key};
use crate::key::{KeyBuffer, RequestKey};
use crate::response::LayerBody;
use crate::shared::{AtOnce, Shared};
use http::request::Parts;
use http::{Request, Response};
use sluice_core::{Clock, Decision, Key, Source, Store, StoreError, Verdict};
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
        // The usual case on the shortest path: decided by the memory store from the head
        // in place, with no verdict built; the request is taken apart only when it has to
        // be (for the cost function, a closure extractor, or the answers that read the
        // head). Deciding out of line keeps this function small enough to be inlined
        // into its caller, which then builds this response future in its own frame
        // rather than receiving a copy of it. An allowed request's fields are rendered
        // after the inner call, from the decision (plain data), so that nothing that must
        // be dropped is alive across that call.
        match self.shared.decide_at_once(request.headers(), request.extensions()) {
            AtOnce::Allowed(decision) => {
                let future = self.inner.call(request);
                ResponseFuture::inner(future, self.shared.allowed_fields(&decision))
            }
            AtOnce::Refused(decision) => self.refuse(request, decision),
            AtOnce::Elsewhere => self.call_with_key(request),
        }
    }
}

impl<T, S: Store, C: Clock> RateLimit<T, S, C> {
    /// Answers a request that the memory store did not let through at once.
    #[cold]
    #[inline(never)]
    fn refuse<ReqBody, ResBody>(
        &mut self,
        request: Request<ReqBody>,
        decision: Decision,
    ) -> ResponseFuture<T::Future, ResBody, T::Error>
    where
        T: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
        T::Future: Send,
        ReqBody: Send + 'static,
        ResBody: LayerBody,
    {
        let (parts, body) = request.into_parts();
        let judgement = judge(&self.shared, Ok(Verdict::new(decision, 0, Source::Store)), &parts);
        self.answer(judgement, parts, body)
    }

    /// [`call`](Service::call) off the shortest path.
    #[inline(never)]
    fn call_with_key<ReqBody, ResBody>(
        &mut self,
        request: Request<ReqBody>,
    ) -> ResponseFuture<T::Future, ResBody, T::Error>
    where
        T: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
        T::Future: Send,
        ReqBody: Send + 'static,
        ResBody: LayerBody,
    {
        let shared = &self.shared;
        let key = match shared.key.key_in(request.headers(), request.extensions(), &mut KeyBuffer::new()) {
            Some(key) if shared.cost.is_none() => key.map(RequestKey::from),
            _ => return self.call_with_head(request),
        };
        let Some(key) = or_shared_key(shared, key) else {
            return self.call_with_head(request);
        };
        let Some(checked) = self.check_at_once(&key, 1) else {
            let (parts, body) = request.into_parts();
            return self.check_later(key, 1, parts, body);
        };
        match forward(&self.shared, checked) {
            Ok((delay, fields)) if delay.is_zero() => ResponseFuture::inner(self.inner.call(request), fields),
            Ok((delay, fields)) => {
                let (parts, body) = request.into_parts();
                self.answer(Judgement::Forward { delay, fields }, parts, body)
            }
            Err(checked) => {
                let (parts, body) = request.into_parts();
                let judgement = judge(&self.shared, checked, &parts);
                self.answer(judgement, parts, body)
            }
        }
    }

    /// [`call`](Service::call) for requests that must be taken apart to be keyed or costed.
    fn call_with_head<ReqBody, ResBody>(
        &mut self,
        request: Request<ReqBody>,
    ) -> ResponseFuture<T::Future, ResBody, T::Error>
    where
        T: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
        T::Future: Send,
        ReqBody: Send + 'static,
        ResBody: LayerBody,
    {
        let (parts, body) = request.into_parts();
        let Some(key) = request_key(&self.shared, &parts) else {
            return ResponseFuture::ready(missing_key(&self.shared, &parts).map(ResBody::from_rejection));
        };
        let cost = self.shared.cost.as_ref().map_or(1, |cost| cost(&parts));
        match self.check_at_once(&key, cost) {
            Some(checked) => self.answer(judge(&self.shared, checked, &parts), parts, body),
            None => self.check_later(key, cost, parts, body),
        }
    }

    /// The verdict of the memory store, which decides without waiting: no allocation and
    /// no clone of the inner service. `None` for stores that must be awaited.
    fn check_at_once(&self, key: &RequestKey, cost: u64) -> Option<Result<Verdict, StoreError>> {
        let limiter = &self.shared.limiter;
        let memory = self.shared.memory()?;
        let key = Key::new(key.as_bytes()).ok()?;
        let now = limiter.clock().now();
        match limiter.limits() {
            [limit] => {
                Some(memory.check_one(key, limit, now, cost).map(|decision| Verdict::new(decision, 0, Source::Store)))
            }
            limits => Some(memory.check_now(key, limits, now, cost)),
        }
    }

    /// Carries out a judgement made in `call`: the ready inner service answers at once,
    /// unless the request must first wait its turn.
    fn answer<ReqBody, ResBody>(
        &mut self,
        judgement: Judgement,
        parts: Parts,
        body: ReqBody,
    ) -> ResponseFuture<T::Future, ResBody, T::Error>
    where
        T: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
        T::Future: Send,
        ReqBody: Send + 'static,
        ResBody: LayerBody,
    {
        match judgement {
            Judgement::Answer(answer) => ResponseFuture::ready(answer.map(ResBody::from_rejection)),
            Judgement::Forward { delay, fields } if delay.is_zero() => {
                ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), fields)
            }
            judgement => {
                let (shared, inner) = (Arc::clone(&self.shared), self.take_ready_inner());
                ResponseFuture::boxed(async move { carry_out(&shared, inner, judgement, parts, body).await })
            }
        }
    }

    /// Checks on a store that must be awaited, then answers.
    fn check_later<ReqBody, ResBody>(
        &mut self,
        key: RequestKey,
        cost: u64,
        parts: Parts,
        body: ReqBody,
    ) -> ResponseFuture<T::Future, ResBody, T::Error>
    where
        T: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
        T::Future: Send,
        ReqBody: Send + 'static,
        ResBody: LayerBody,
    {
        let (shared, inner) = (Arc::clone(&self.shared), self.take_ready_inner());
        ResponseFuture::boxed(async move {
            let checked = match Key::new(key.as_bytes()) {
                Ok(key) => {
                    let limiter = &shared.limiter;
                    limiter.store().check(key, limiter.limits(), limiter.clock().now(), cost).await
                }
                Err(error) => Err(StoreError::Refused(error.to_string())),
            };
            let judgement = judge(&shared, checked, &parts);
            carry_out(&shared, inner, judgement, parts, body).await
        })
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
async fn carry_out<T, S, C, ReqBody, ResBody>(
    shared: &Shared<S, C>,
    mut inner: T,
    judgement: Judgement,
    parts: Parts,
    body: ReqBody,
) -> Result<Response<ResBody>, T::Error>
where
    T: Service<Request<ReqBody>, Response = Response<ResBody>>,
    C: Clock,
    ResBody: LayerBody,
{
    match judgement {
        Judgement::Answer(answer) => Ok(answer.map(ResBody::from_rejection)),
        Judgement::Forward { delay, fields } => {
            if !delay.is_zero() {
                shared.limiter.clock().sleep(delay).await;
            }
            let response = inner.call(Request::from_parts(parts, body)).await?;
            Ok(with_fields(response, fields))
        }
    }
}
