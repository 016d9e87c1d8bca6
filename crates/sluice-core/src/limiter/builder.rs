//! [`RateLimiterBuilder`]: limits, a clock and a store, put together so that the store
//! follows the limiter's clock.

use super::RateLimiter;
use crate::store::memory::MemoryStoreBuilder;
use crate::{Clock, Limit, MemoryStore, Store, SystemClock};

/// Builds a [`RateLimiter`]: its limits, its clock, and its store.
///
/// By default the limiter reads the [`SystemClock`] and keeps its states in a
/// [`MemoryStore`] that the builder makes on that same clock, so the store only drops a
/// state when it is fresh again by the time requests are judged by: a limiter on a
/// [`ManualClock`](crate::ManualClock) never has its states swept by the system clock.
/// [`store`](Self::store) gives a store of your own instead (such as the Redis store,
/// which keeps its own time), used as it is.
///
/// # Examples
///
/// ```
/// use sluice_core::{Limit, ManualClock, MemoryStore, RateLimiter, SlidingLog, SlidingLogVariant};
/// use std::time::Duration;
///
/// let per_second = SlidingLog::new(10, Duration::from_secs(1), SlidingLogVariant::Accepted)?;
/// let per_day = SlidingLog::new(1_000, Duration::from_secs(86_400), SlidingLogVariant::Accepted)?;
/// let clock = ManualClock::default();
/// let limiter = RateLimiter::builder()
///     .limits([Limit::new("second", per_second), Limit::new("day", per_day)])
///     .clock(clock.clone())
///     .memory_store(MemoryStore::builder().max_keys(100_000))
///     .build()?;
/// assert_eq!(limiter.check_n("k", 10)?.remaining, 0);
/// assert!(!limiter.check("k")?.allowed);
/// clock.advance(Duration::from_secs(1));
/// assert!(limiter.check("k")?.allowed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use]
pub struct RateLimiterBuilder<S = MemoryStoreBuilder, C = SystemClock> {
    limits: Vec<Limit>,
    store: S,
    clock: C,
}

impl Default for RateLimiterBuilder {
    fn default() -> Self {
        RateLimiterBuilder { limits: Vec::new(), store: MemoryStore::builder(), clock: SystemClock::new() }
    }
}

impl<S, C> RateLimiterBuilder<S, C> {
    /// Adds a limit. A request is allowed only if every limit allows it.
    pub fn limit(mut self, limit: Limit) -> Self {
        self.limits.push(limit);
        self
    }

    /// Adds several limits.
    pub fn limits(mut self, limits: impl IntoIterator<Item = Limit>) -> Self {
        self.limits.extend(limits);
        self
    }

    /// Reads time from `clock` (a [`ManualClock`](crate::ManualClock) in tests, the
    /// [`SystemClock`] by default). A memory store made by the builder follows it too.
    pub fn clock<D: Clock + Clone>(self, clock: D) -> RateLimiterBuilder<S, D> {
        RateLimiterBuilder { limits: self.limits, store: self.store, clock }
    }

    /// Keeps states in `store`, used as it is: a store given here keeps its own time (the
    /// Redis store reads Redis's; a memory store, the clock it was built with).
    pub fn store<T: Store>(self, store: T) -> RateLimiterBuilder<T, C> {
        RateLimiterBuilder { limits: self.limits, store, clock: self.clock }
    }

    /// Keeps states in a memory store with these settings (cap, shards), built on the
    /// limiter's clock when the limiter is built; a clock set on `settings` is replaced.
    pub fn memory_store(self, settings: MemoryStoreBuilder) -> RateLimiterBuilder<MemoryStoreBuilder, C> {
        RateLimiterBuilder { limits: self.limits, store: settings, clock: self.clock }
    }

    fn parts(self) -> Result<(std::sync::Arc<[Limit]>, S, C), BuildError> {
        if self.limits.is_empty() {
            return Err(BuildError::NoLimits);
        }
        Ok((self.limits.into(), self.store, self.clock))
    }
}

impl<C: Clock + Clone> RateLimiterBuilder<MemoryStoreBuilder, C> {
    /// The limiter, on a new memory store that judges its states by the limiter's clock.
    ///
    /// # Errors
    ///
    /// [`BuildError::NoLimits`] when no limit was given.
    pub fn build(self) -> Result<RateLimiter<MemoryStore, C>, BuildError> {
        let (limits, settings, clock) = self.parts()?;
        let store = settings.clock(clock.clone()).build();
        Ok(RateLimiter { limits, store, clock })
    }
}

impl<S: Store, C: Clock> RateLimiterBuilder<S, C> {
    /// The limiter, on the store given to [`store`](Self::store).
    ///
    /// # Errors
    ///
    /// [`BuildError::NoLimits`] when no limit was given.
    pub fn build(self) -> Result<RateLimiter<S, C>, BuildError> {
        let (limits, store, clock) = self.parts()?;
        Ok(RateLimiter { limits, store, clock })
    }
}

/// A limiter that cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No limit was given: a limiter needs at least one.
    #[error("a rate limiter needs at least one limit")]
    NoLimits,
}
