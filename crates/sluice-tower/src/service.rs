//! [`RateLimit`]: the service a [`RateLimitLayer`](crate::RateLimitLayer) wraps around another.

use crate::future::ResponseFuture;
use crate::headers::{Fields, insert_rate_limit_headers};
use crate::key::MissingKey;
use crate::response::{Rejection, ResponseBody, unchecked};
use crate::shared::{OnStoreError, Shared};
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::Either;
use sluice::{Clock, Decision, Key, Limit, RetryAfter, Source, Store};
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
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = T::Error;
    type Future = ResponseFuture<Self::Response, T::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The clone is not ready; the ready one is taken for this request (axum's advice).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let shared = Arc::clone(&self.shared);
        ResponseFuture::new(async move { limit(shared, inner, request).await })
    }
}

/// Checks `request` and answers it, through `inner` when allowed.
async fn limit<T, S, C, ReqBody, ResBody>(
    shared: Arc<Shared<S, C>>,
    inner: T,
    request: Request<ReqBody>,
) -> Result<Response<ResponseBody<ResBody>>, T::Error>
where
    T: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S: Store,
    C: Clock,
{
    let (parts, body) = request.into_parts();
    let Some(key) = shared.key.extract(&parts).or_else(|| shared_key(&shared.missing_key)) else {
        return Ok(missing_key(&parts, &shared.missing_key));
    };
    let Ok(key) = Key::new(key.as_bytes()) else {
        return Ok(missing_key(&parts, &shared.missing_key));
    };
    let cost = shared.cost.as_ref().map_or(1, |cost| cost(&parts));
    let verdict = match shared.store.check(key, &shared.limits, shared.clock.now(), cost).await {
        Ok(verdict) => verdict,
        Err(error) if shared.on_store_error == OnStoreError::Reject => {
            return Ok(rejected(unchecked(&parts, StatusCode::SERVICE_UNAVAILABLE, &error.to_string())));
        }
        Err(_) => return forward(inner, parts, body, None).await,
    };
    let limit = &shared.limits[verdict.limit.min(shared.limits.len() - 1)];
    let decision = shaped(&shared, verdict.decision).await;
    if !decision.allowed {
        return Ok(reject(&shared, limit, &decision, &parts));
    }
    let fields = (verdict.source != Source::FailedOpen).then_some((limit, &decision, shared.fields));
    forward(inner, parts, body, fields).await
}

/// The key of keyless requests, when they share one.
fn shared_key(rule: &MissingKey) -> Option<crate::key::RequestKey> {
    match rule {
        MissingKey::Shared(key) => Some(key.clone()),
        MissingKey::Reject(_) => None,
    }
}

fn missing_key<B>(parts: &Parts, rule: &MissingKey) -> Response<ResponseBody<B>> {
    let status = match rule {
        MissingKey::Reject(status) => *status,
        MissingKey::Shared(_) => StatusCode::BAD_REQUEST,
    };
    rejected(unchecked(parts, status, "the request has no valid rate-limit key"))
}

/// Waits out an allowed decision's shaping delay on the layer's clock, or turns it into a
/// rejection when the wait is longer than allowed.
async fn shaped<S, C: Clock>(shared: &Shared<S, C>, decision: Decision) -> Decision {
    if !decision.allowed || decision.delay.is_zero() {
        return decision;
    }
    if decision.delay > shared.max_delay {
        return Decision { allowed: false, retry_after: Some(RetryAfter::After(decision.delay)), ..decision };
    }
    shared.clock.sleep(decision.delay).await;
    decision
}

fn reject<S, C, B>(
    shared: &Shared<S, C>,
    limit: &Limit,
    decision: &Decision,
    parts: &Parts,
) -> Response<ResponseBody<B>> {
    let mut response = (shared.on_rejection)(&Rejection { limit, decision, parts });
    insert_rate_limit_headers(response.headers_mut(), limit.name(), limit.policy(), decision, shared.fields);
    rejected(response)
}

fn rejected<B>(response: Response<crate::response::RejectionBody>) -> Response<ResponseBody<B>> {
    response.map(Either::Right)
}

/// Calls the inner service and adds the rate-limit fields of `fields`' decision.
async fn forward<T, ReqBody, ResBody>(
    mut inner: T,
    parts: Parts,
    body: ReqBody,
    fields: Option<(&Limit, &Decision, Fields)>,
) -> Result<Response<ResponseBody<ResBody>>, T::Error>
where
    T: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    let mut response = inner.call(Request::from_parts(parts, body)).await?;
    if let Some((limit, decision, fields)) = fields {
        insert_rate_limit_headers(response.headers_mut(), limit.name(), limit.policy(), decision, fields);
    }
    Ok(response.map(Either::Left))
}
