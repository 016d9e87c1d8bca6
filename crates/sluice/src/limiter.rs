//! The user-facing limiter: limits, a store and a clock.

use crate::decision::micros;
use crate::{Clock, Decision, Key, KeyError, Limit, MemoryStore, RetryAfter, Store, StoreError, SystemClock};
use std::sync::Arc;
use std::time::Duration;

/// Checks requests against one or several limits, reading time from a clock.
///
/// The only layer that reads a [`Clock`]; everything below it takes `now` as a parameter.
/// With several limits, a request is allowed only if every limit allows it (docs/semantics.md).
///
/// # Examples
///
/// ```
/// use sluice::{Limit, ManualClock, RateLimiter, SlidingLog, SlidingLogVariant};
/// use std::time::Duration;
///
/// # futures_lite_block_on(async {
/// let policy = SlidingLog::new(2, Duration::from_secs(1), SlidingLogVariant::Accepted)?;
/// let limiter = RateLimiter::new(Limit::new("api", policy)).with_clock(ManualClock::default());
///
/// assert!(limiter.check("alice").await?.allowed);
/// assert!(limiter.check("alice").await?.allowed);
/// let third = limiter.check("alice").await?;
/// assert!(!third.allowed);
/// assert_eq!(third.retry_after_micros(), Some(1_000_000));
/// assert!(limiter.check("bob").await?.allowed); // keys are independent
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RateLimiter<S = MemoryStore, C = SystemClock> {
    limits: Arc<[Limit]>,
    store: S,
    clock: C,
    /// The store was created by this limiter (not given by the caller), so it may be
    /// replaced by one that follows a new clock.
    own_store: bool,
}

impl RateLimiter {
    /// A limiter for one limit, on a fresh in-memory store and the system clock.
    pub fn new(limit: Limit) -> Self {
        RateLimiter::all_of([limit])
    }

    /// A limiter that admits a request only if every one of `limits` does.
    ///
    /// # Panics
    ///
    /// When `limits` is empty.
    pub fn all_of(limits: impl IntoIterator<Item = Limit>) -> Self {
        let limits: Arc<[Limit]> = limits.into_iter().collect();
        assert!(!limits.is_empty(), "a rate limiter needs at least one limit");
        RateLimiter { limits, store: MemoryStore::new(), clock: SystemClock::new(), own_store: true }
    }
}

impl<S: Store, C: Clock> RateLimiter<S, C> {
    /// The same limiter on another store.
    pub fn with_store<T: Store>(self, store: T) -> RateLimiter<T, C> {
        RateLimiter { limits: self.limits, store, clock: self.clock, own_store: false }
    }

    /// The same limiter reading another clock (a [`ManualClock`](crate::ManualClock) in tests).
    ///
    /// If the limiter created its store itself, the store follows the new clock too, so
    /// that states are never swept by a clock other than the one requests are timed by.
    pub fn with_clock<D: Clock + Clone>(self, clock: D) -> RateLimiter<S, D> {
        let store = match self.own_store {
            true => self.store.empty_with_clock(&clock).unwrap_or(self.store),
            false => self.store,
        };
        RateLimiter { limits: self.limits, store, clock, own_store: self.own_store }
    }

    /// The limits checked.
    pub fn limits(&self) -> &[Limit] {
        &self.limits
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Checks one request of cost 1 for `key`.
    ///
    /// # Errors
    ///
    /// When the key is empty or longer than 1024 bytes, or the store cannot decide.
    /// Being over the limit is not an error: it is a `Decision` with `allowed == false`.
    pub async fn check(&self, key: impl AsRef<[u8]>) -> Result<Decision, CheckError> {
        self.check_n(key, 1).await
    }

    /// Checks one request of `cost` for `key`; `cost = 0` only looks.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check).
    pub async fn check_n(&self, key: impl AsRef<[u8]>, cost: u64) -> Result<Decision, CheckError> {
        let key = Key::new(key.as_ref())?;
        let verdict = self.store.check(key, &self.limits, self.clock.now(), cost).await?;
        Ok(verdict.decision)
    }

    /// Waits until a request of `cost` for `key` is allowed, for at most `max_wait`.
    ///
    /// Returns the allowed decision after waiting out its shaping `delay`, or the last
    /// rejection when waiting longer than `max_wait` would be needed (or the cost can never
    /// be allowed). Waiting uses the clock's `sleep`, so a [`ManualClock`](crate::ManualClock)
    /// makes it instant.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check).
    pub async fn acquire(&self, key: impl AsRef<[u8]>, cost: u64, max_wait: Duration) -> Result<Decision, CheckError> {
        let key = key.as_ref();
        let mut waited = Duration::ZERO;
        loop {
            let decision = self.check_n(key, cost).await?;
            if decision.allowed {
                self.clock.sleep(decision.delay).await;
                return Ok(decision);
            }
            let wait = match decision.retry_after {
                Some(RetryAfter::After(wait)) if waited + wait <= max_wait => wait,
                _ => return Ok(decision),
            };
            // Never spin: a retry is at least a microsecond away.
            let wait = Duration::from_micros(micros(wait).max(1));
            self.clock.sleep(wait).await;
            waited += wait;
        }
    }
}

/// A check that could not be decided.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The key is empty or too long.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The store could not decide.
    #[error(transparent)]
    Store(#[from] StoreError),
}
