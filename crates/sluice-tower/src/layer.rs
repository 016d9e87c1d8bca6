//! [`RateLimitLayer`]: the policies, the store, the key and the rules, applied to a service.

use crate::headers::Fields;
use crate::key::{KeyExtractor, MissingKey};
use crate::response::{Rejection, RejectionBody, default_rejection};
use crate::service::RateLimit;
use crate::shared::{OnStoreError, Shared, policy_fields};
use http::request::Parts;
use sluice_core::{Clock, Limit, MemoryStore, RateLimiter, Store, SystemClock};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tower::Layer;

/// Applies rate limiting to a service: each request is keyed, checked against every
/// policy (all or nothing), and either passes with `RateLimit` fields or is answered 429.
///
/// Cheap to clone: its services share one store, so a limit holds across all the routes a
/// layer is applied to.
///
/// # Examples
///
/// ```
/// use sluice_tower::{Limit, RateLimitLayer, TokenBucket, TokenBucketSettings, key::HeaderKey};
/// use std::time::Duration;
///
/// let bucket = TokenBucketSettings { capacity: 10, refill_amount: 1, refill_interval: Duration::from_secs(1) };
/// let per_api_key = Limit::new("api", TokenBucket::new(bucket)?);
/// let layer = RateLimitLayer::new(per_api_key, HeaderKey::new(http::HeaderName::from_static("x-api-key")))
///     .cost(|parts| if parts.method == http::Method::POST { 5 } else { 1 });
/// # #[cfg(feature = "axum")] {
/// let app = axum::Router::<()>::new().route("/api", axum::routing::get(|| async { "ok" })).layer(layer);
/// # let _ = app;
/// # }
/// # Ok::<(), sluice_tower::PolicyError>(())
/// ```
#[must_use]
pub struct RateLimitLayer<S = MemoryStore, C = SystemClock> {
    shared: Arc<Shared<S, C>>,
}

impl RateLimitLayer {
    /// Limits requests by `key` with one policy, in memory, on the system clock.
    pub fn new(limit: Limit, key: impl KeyExtractor) -> Self {
        RateLimitLayer::from_limiter(RateLimiter::new(limit), key)
    }
}

impl<S: Store + Clone, C: Clock + Clone> RateLimitLayer<S, C> {
    /// Limits requests by `key` with `limiter`'s policies, store and clock.
    ///
    /// Build the limiter with [`RateLimiter::builder`]: several policies (a request passes
    /// only if every one allows it, such as 10 per second and 1000 per day, and consumes
    /// from none otherwise); another clock (a `ManualClock` in tests), which a memory store
    /// made by the builder follows and on which shaped requests wait; or another store,
    /// such as a `RedisStore` shared by every instance of the service, whose failure mode
    /// decides while it is unreachable.
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_tower::{Limit, RateLimitLayer, RateLimiter, SlidingLog, SlidingLogVariant, key::PeerIp};
    /// use std::time::Duration;
    ///
    /// let per_second = SlidingLog::new(10, Duration::from_secs(1), SlidingLogVariant::Accepted)?;
    /// let per_day = SlidingLog::new(1_000, Duration::from_secs(86_400), SlidingLogVariant::Accepted)?;
    /// let limiter = RateLimiter::builder()
    ///     .limits([Limit::new("second", per_second), Limit::new("day", per_day)])
    ///     .build()?;
    /// let layer = RateLimitLayer::from_limiter(limiter, PeerIp::new());
    /// assert_eq!(layer.limits().len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_limiter(limiter: RateLimiter<S, C>, key: impl KeyExtractor) -> Self {
        let on_rejection = Arc::new(|rejection: &Rejection<'_>| default_rejection(rejection));
        let shared = Shared {
            policy_fields: policy_fields(limiter.limits(), Fields::default()),
            limiter,
            key: Arc::new(key),
            cost: None,
            missing_key: MissingKey::default(),
            fields: Fields::default(),
            max_delay: None,
            on_rejection,
            on_store_error: OnStoreError::default(),
        };
        RateLimitLayer { shared: Arc::new(shared) }
    }

    /// Each request costs what `cost` says (1 without it; 0 only looks).
    pub fn cost(self, cost: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Self {
        self.map(|shared| shared.cost = Some(Arc::new(cost)))
    }

    /// What happens to requests without a key (default: 400 with a `problem+json` body).
    pub fn missing_key(self, rule: MissingKey) -> Self {
        self.map(|shared| shared.missing_key = rule)
    }

    /// Which rate-limit fields responses carry (default: the IETF ones only).
    pub fn fields(self, fields: Fields) -> Self {
        self.map(|shared| {
            shared.fields = fields;
            shared.policy_fields = policy_fields(shared.limiter.limits(), fields);
        })
    }

    /// The longest a shaped request may wait for its turn; one that would wait longer is
    /// answered 429 at once, with its wait as `Retry-After`.
    ///
    /// By default there is no such bound but the policy's own: a leaky bucket in `delay`
    /// mode queues at most `burst` requests, so a request waits at most `burst × interval`,
    /// and one that would wait longer is rejected by the policy without taking a turn.
    /// A request rejected here instead has taken its turn already (the store recorded it
    /// when it decided), so under a steady load every request behind it waits longer too:
    /// with a bound below `burst × interval`, requests arriving at the leak rate can all be
    /// rejected. To bound the wait, prefer a smaller `burst`; set this only as a last
    /// guard, at `burst × interval` or more.
    pub fn max_delay(self, max_delay: Duration) -> Self {
        self.map(|shared| shared.max_delay = Some(max_delay))
    }

    /// Answers rejections with `respond` instead of [`default_rejection`]; the layer still
    /// adds the rate-limit fields and `Retry-After`. Only a policy's rejections come here:
    /// an outage (503) and a request without a key keep the layer's own answers.
    pub fn on_rejection(
        self,
        respond: impl Fn(&Rejection<'_>) -> http::Response<RejectionBody> + Send + Sync + 'static,
    ) -> Self {
        self.map(|shared| shared.on_rejection = Arc::new(respond))
    }

    /// What a store that cannot decide at all means (default: 503). A store's own failure
    /// mode (such as the Redis store's `open`) answers first, when it has one.
    pub fn on_store_error(self, rule: OnStoreError) -> Self {
        self.map(|shared| shared.on_store_error = rule)
    }

    /// The policies checked.
    pub fn limits(&self) -> &[Limit] {
        self.shared.limiter.limits()
    }

    /// The store.
    pub fn store(&self) -> &S {
        self.shared.limiter.store()
    }

    fn map(self, change: impl FnOnce(&mut Shared<S, C>)) -> Self {
        let mut shared = self.into_shared();
        change(&mut shared);
        RateLimitLayer { shared: Arc::new(shared) }
    }

    fn into_shared(self) -> Shared<S, C> {
        Arc::try_unwrap(self.shared).unwrap_or_else(|shared| (*shared).clone())
    }
}

impl<S, C> Clone for RateLimitLayer<S, C> {
    fn clone(&self) -> Self {
        RateLimitLayer { shared: Arc::clone(&self.shared) }
    }
}

impl<S: fmt::Debug, C: fmt::Debug> fmt::Debug for RateLimitLayer<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}

impl<T, S, C> Layer<T> for RateLimitLayer<S, C> {
    type Service = RateLimit<T, S, C>;

    fn layer(&self, inner: T) -> Self::Service {
        RateLimit::new(inner, Arc::clone(&self.shared))
    }
}
