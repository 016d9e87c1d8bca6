//! The answer to "may this request pass?".

use std::time::Duration;

/// When a rejected request could succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RetryAfter {
    /// A request of the same cost would be allowed after this long, if no other request came.
    After(Duration),
    /// The cost exceeds what the policy can ever allow (its limit, capacity or burst).
    Never,
}

/// A decision for one request, with everything rate-limit headers need.
///
/// A rejection is a `Decision` too, never an error: `Err` is kept for "could not decide".
/// All durations are whole microseconds, so every store reports the same values exactly.
///
/// Its fields are public to read; outside this crate a decision is built with
/// [`allowed`](Decision::allowed), [`rejected`](Decision::rejected) and
/// [`delayed`](Decision::delayed), so that new fields can be added without breaking stores
/// written elsewhere.
///
/// # Examples
///
/// ```
/// use sluice_core::{Decision, Quota, RetryAfter};
/// use std::time::Duration;
///
/// let allowed = Decision::allowed(Quota { limit: 10, remaining: 9 }, Duration::from_secs(1));
/// assert!(allowed.allowed && allowed.retry_after.is_none());
///
/// let rejected = allowed.rejected(RetryAfter::After(Duration::from_millis(100)));
/// assert!(!rejected.allowed);
/// assert_eq!(rejected.retry_after_micros(), Some(100_000));
/// assert_eq!(rejected.limit, 10);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Decision {
    /// The request may proceed.
    pub allowed: bool,
    /// The policy's limit `N` (token bucket: capacity; leaky bucket: `burst + 1`).
    pub limit: u64,
    /// How many more cost-1 requests would be allowed right now, after this decision.
    pub remaining: u64,
    /// Time until the state is back to fresh (all quota restored) if no more requests came.
    pub reset_after: Duration,
    /// Only when rejected: when a request of the same cost could pass.
    pub retry_after: Option<RetryAfter>,
    /// Leaky bucket in `delay` mode only: how long the caller should wait before proceeding.
    pub delay: Duration,
}

/// The two counts of a decision, named so they cannot be swapped: the policy's `limit`
/// and how many cost-1 requests `remain` after the decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quota {
    /// The policy's limit `N` (token bucket: capacity; leaky bucket: `burst + 1`).
    pub limit: u64,
    /// How many more cost-1 requests would be allowed right now.
    pub remaining: u64,
}

impl Decision {
    /// An allowed request with `quota` left, its state fresh again after `reset_after`.
    ///
    /// For stores outside this crate (such as the Redis store) and for tests.
    pub fn allowed(quota: Quota, reset_after: Duration) -> Self {
        Decision {
            allowed: true,
            limit: quota.limit,
            remaining: quota.remaining,
            reset_after,
            retry_after: None,
            delay: Duration::ZERO,
        }
    }

    /// The same decision, rejected: a request of the same cost could pass per `retry_after`.
    /// A rejected request does not wait, so any shaping `delay` is dropped.
    #[must_use]
    pub fn rejected(self, retry_after: RetryAfter) -> Self {
        Decision { allowed: false, retry_after: Some(retry_after), delay: Duration::ZERO, ..self }
    }

    /// The same decision with a shaping `delay` (leaky bucket in `delay` mode): the caller
    /// should wait that long before proceeding.
    #[must_use]
    pub fn delayed(self, delay: Duration) -> Self {
        Decision { delay, ..self }
    }

    /// The same decision with `remaining` cost-1 requests left.
    #[must_use]
    pub fn with_remaining(self, remaining: u64) -> Self {
        Decision { remaining, ..self }
    }

    /// The same decision with its state fresh again after `reset_after`.
    #[must_use]
    pub fn with_reset_after(self, reset_after: Duration) -> Self {
        Decision { reset_after, ..self }
    }

    /// An allowed request.
    pub(crate) fn allow(limit: u64, remaining: u64, reset_after_us: u64) -> Self {
        Decision {
            allowed: true,
            limit,
            remaining,
            reset_after: Duration::from_micros(reset_after_us),
            retry_after: None,
            delay: Duration::ZERO,
        }
    }

    /// A rejected request that could pass after `retry_after_us`.
    pub(crate) fn reject(limit: u64, remaining: u64, reset_after_us: u64, retry_after_us: u64) -> Self {
        Decision {
            allowed: false,
            retry_after: Some(RetryAfter::After(Duration::from_micros(retry_after_us))),
            ..Decision::allow(limit, remaining, reset_after_us)
        }
    }

    /// A rejected request whose cost the policy can never allow.
    pub(crate) fn never(limit: u64, remaining: u64, reset_after_us: u64) -> Self {
        Decision {
            allowed: false,
            retry_after: Some(RetryAfter::Never),
            ..Decision::allow(limit, remaining, reset_after_us)
        }
    }

    /// The same decision with a shaping delay.
    pub(crate) fn with_delay(self, delay_us: u64) -> Self {
        Decision { delay: Duration::from_micros(delay_us), ..self }
    }

    /// `retry_after` in microseconds, `None` when allowed or never.
    pub fn retry_after_micros(&self) -> Option<u64> {
        match self.retry_after {
            Some(RetryAfter::After(wait)) => Some(micros(wait)),
            _ => None,
        }
    }

    /// How much more restrictive `self` is than `other`: rejections first, then the longer
    /// wait, then the fewer remaining requests. Used to report one decision for several
    /// policies.
    pub(crate) fn is_more_restrictive_than(&self, other: &Decision) -> bool {
        if self.allowed != other.allowed {
            return !self.allowed;
        }
        if self.retry_after != other.retry_after {
            return self.retry_after > other.retry_after;
        }
        self.remaining < other.remaining
    }
}

/// Whole microseconds of a duration built by this crate (which never exceed `u64`).
pub(crate) fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}
