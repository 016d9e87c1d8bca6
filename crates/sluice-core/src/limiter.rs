//! The user-facing limiter: limits, a store and a clock.
//!
//! On the [`MemoryStore`], [`RateLimiter::check`] and [`RateLimiter::check_n`] decide at
//! once, without a future, on the store's decide-now path ([`MemoryStore::check_now`],
//! which is what the store answers to [`Store::check_ready`]). [`RateLimiter::check_async`], [`RateLimiter::check_n_async`] and
//! [`RateLimiter::acquire`] work on any [`Store`], such as the Redis store.

mod builder;

pub use builder::{BuildError, RateLimiterBuilder};

use crate::decision::micros;
use crate::{Check, Clock, Decision, Key, KeyError, Limit, MemoryStore, RetryAfter, Store, StoreError, SystemClock};
use std::sync::Arc;
use std::time::Duration;

/// Checks requests against one or several limits, reading time from a clock.
///
/// Reads its [`Clock`] once per check and passes `now` to the store (which clock decides and
/// which drops states: [`Clock`]). With several limits, a request is allowed only if every limit allows it (docs/semantics.md).
///
/// Build one with [`RateLimiter::new`] (one limit, in memory, on the system clock) or
/// [`RateLimiter::builder`] (several limits, another clock, another store).
///
/// # Examples
///
/// ```
/// use sluice_core::{Limit, ManualClock, RateLimiter, SlidingLog, SlidingLogVariant};
/// use std::time::Duration;
///
/// let policy = SlidingLog::new(2, Duration::from_secs(1), SlidingLogVariant::Accepted)?;
/// let limiter = RateLimiter::builder().limit(Limit::new("api", policy)).clock(ManualClock::default()).build()?;
///
/// assert!(limiter.check("alice")?.allowed);
/// assert!(limiter.check("alice")?.allowed);
/// let third = limiter.check("alice")?;
/// assert!(!third.allowed);
/// assert_eq!(third.retry_after_micros(), Some(1_000_000));
/// assert!(limiter.check("bob")?.allowed); // keys are independent
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct RateLimiter<S = MemoryStore, C = SystemClock> {
    limits: Arc<[Limit]>,
    store: S,
    clock: C,
}

impl RateLimiter {
    /// A limiter for one limit, on a fresh in-memory store and the system clock.
    pub fn new(limit: Limit) -> Self {
        RateLimiter { limits: Arc::new([limit]), store: MemoryStore::new(), clock: SystemClock::new() }
    }

    /// A builder for several limits, another clock or another store.
    pub fn builder() -> RateLimiterBuilder {
        RateLimiterBuilder::default()
    }
}

impl<C: Clock> RateLimiter<MemoryStore, C> {
    /// Checks one request of cost 1 for `key`, at once.
    ///
    /// # Errors
    ///
    /// When the key is empty or longer than 1024 bytes. Being over the limit is not an
    /// error: it is a `Decision` with `allowed == false`.
    #[inline]
    pub fn check(&self, key: impl AsRef<[u8]>) -> Result<Decision, CheckError> {
        self.check_n(key, 1)
    }

    /// Checks one request of `cost` for `key`, at once; `cost = 0` only looks.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check).
    #[inline]
    pub fn check_n(&self, key: impl AsRef<[u8]>, cost: u64) -> Result<Decision, CheckError> {
        let key = Key::new(key.as_ref())?;
        Ok(self.store.check_now(key, &self.limits, self.clock.now(), cost)?.decision)
    }
}

impl<S, C> RateLimiter<S, C> {
    /// The limits checked.
    pub fn limits(&self) -> &[Limit] {
        &self.limits
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

impl<S: Store, C: Clock> RateLimiter<S, C> {
    /// Checks one request of cost 1 for `key` on any store (use
    /// [`check`](RateLimiter::check) on the memory store).
    ///
    /// # Errors
    ///
    /// When the key is empty or longer than 1024 bytes, or the store cannot decide.
    /// Being over the limit is not an error: it is a `Decision` with `allowed == false`.
    pub async fn check_async(&self, key: impl AsRef<[u8]>) -> Result<Decision, CheckError> {
        self.check_n_async(key, 1).await
    }

    /// Checks one request of `cost` for `key` on any store; `cost = 0` only looks.
    ///
    /// # Errors
    ///
    /// As [`check_async`](Self::check_async).
    pub async fn check_n_async(&self, key: impl AsRef<[u8]>, cost: u64) -> Result<Decision, CheckError> {
        let key = Key::new(key.as_ref())?;
        let verdict = self.store.check(Check::new(key, &self.limits, self.clock.now(), cost)).await?;
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
    /// As [`check_async`](Self::check_async).
    pub async fn acquire(&self, key: impl AsRef<[u8]>, cost: u64, max_wait: Duration) -> Result<Decision, CheckError> {
        let key = key.as_ref();
        let mut waited = Duration::ZERO;
        loop {
            let decision = self.check_n_async(key, cost).await?;
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
