//! What each algorithm allows a lease: whether it can be leased at all, how long its
//! units stay spendable, and what a leased decision may honestly report.

use crate::{Decision, LeakMode, Limit, Policy, SlidingLogVariant};
use std::fmt;
use std::time::Duration;

/// A limit that cannot be leased exactly, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct LeaseRefusal {
    /// The limit's name.
    pub limit: String,
    /// The algorithm, as written in configuration files.
    pub algorithm: &'static str,
    /// Why a lease of it could admit more than its definition allows.
    pub reason: &'static str,
}

impl fmt::Display for LeaseRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "limit `{}` ({}) cannot be leased exactly: {}; turn leases off (lease period 0) or use \
             fixed_window, sliding_window (variant accepted) or leaky_bucket (mode nodelay) for it",
            self.limit, self.algorithm, self.reason
        )
    }
}

/// Checks that every limit in `limits` can be leased exactly (docs/leases.md).
///
/// # Errors
///
/// The first limit that cannot, with the reason.
///
/// # Examples
///
/// ```
/// use sluice_core::lease::check_leasable;
/// use sluice_core::{Alignment, FixedWindow, Limit, SlidingLog, SlidingLogVariant};
/// use std::time::Duration;
///
/// let window = FixedWindow::new(100, Duration::from_secs(60), Alignment::Aligned, Duration::ZERO)?;
/// assert!(check_leasable(&[Limit::new("api", window)]).is_ok());
/// let log = SlidingLog::new(100, Duration::from_secs(60), SlidingLogVariant::Accepted)?;
/// let refused = check_leasable(&[Limit::new("login", log)]).unwrap_err();
/// assert_eq!(refused.limit, "login");
/// # Ok::<(), sluice_core::PolicyError>(())
/// ```
pub fn check_leasable(limits: &[Limit]) -> Result<(), LeaseRefusal> {
    for limit in limits {
        if let Some(reason) = refusal(limit.policy()) {
            let algorithm = limit.policy().algorithm_name();
            return Err(LeaseRefusal { limit: limit.name().to_owned(), algorithm, reason });
        }
    }
    Ok(())
}

/// True when every limit in `limits` can be leased exactly.
pub(crate) fn leasable(limits: &[Limit]) -> bool {
    limits.iter().all(|limit| refusal(limit.policy()).is_none())
}

/// Why `policy` cannot be leased exactly, or `None` when it can.
fn refusal(policy: &Policy) -> Option<&'static str> {
    match policy {
        Policy::FixedWindow(_) => None,
        Policy::SlidingWindow(window) if window.variant() == SlidingLogVariant::Accepted => None,
        Policy::SlidingWindow(_) => Some(
            "the attempts variant counts rejected requests, so a lease that does not fit would be \
             counted as attempts nobody made",
        ),
        Policy::LeakyBucket(bucket) if bucket.mode() == LeakMode::NoDelay => None,
        Policy::LeakyBucket(_) => Some(
            "a shaper gives each request its own place in one queue (its delay), which a unit \
             spent later than it was leased does not keep",
        ),
        Policy::SlidingLog(_) => Some(
            "the log keeps each request's own time, so a unit leased at t and spent later would \
             leave the log before the window that holds its real time ends, and free room early",
        ),
        Policy::TokenBucket(_) => Some(
            "a full bucket restarts its refill clock at the next request, so a unit spent later \
             than it was leased can move that restart and admit a request the definition refuses",
        ),
    }
}

/// Units a lease must debit beyond those it may spend, for `limits` leased for `period`:
/// a leaky bucket's lease is debited as if its units arrived at the end of their life,
/// which costs `ceil(period / interval)` units more (docs/leases.md). 0 without one.
pub(crate) fn pad(limits: &[Limit], period: Duration) -> u64 {
    let pad_of = |limit: &Limit| match limit.policy() {
        Policy::LeakyBucket(bucket) => period.as_micros().div_ceil(bucket.interval().as_micros().max(1)),
        _ => 0,
    };
    let most = limits.iter().map(pad_of).max().unwrap_or(0);
    u64::try_from(most).unwrap_or(u64::MAX)
}

/// How long after the store's decision `decision` (for the lease's whole cost) units
/// leased under `limit` may be spent: to the end of the window (fixed window) or of the
/// bucket (sliding window) they were debited in, and never past `period`.
pub(crate) fn valid_for(limit: &Limit, decision: &Decision, period: Duration) -> Duration {
    let own = match limit.policy() {
        Policy::FixedWindow(_) => decision.reset_after,
        // An admitted request's state is fresh again `window` after its bucket ends.
        Policy::SlidingWindow(window) => decision.reset_after.saturating_sub(window.window()),
        Policy::LeakyBucket(_) => period,
        Policy::SlidingLog(_) | Policy::TokenBucket(_) => Duration::ZERO,
    };
    own.min(period)
}

/// The `reset_after` a leased decision reports for `limit`, `elapsed` after the lease's
/// store decision `decision`: never sooner than the truth. A window's end does not move
/// (fixed window: its end; sliding window: the end of the lease's bucket plus the window,
/// and the lease's bucket is the newest counted one); a leaky bucket's true state is not
/// known here, so its longest possible reset, `(burst + 1) · interval`.
pub(crate) fn reset_after(limit: &Limit, decision: &Decision, elapsed: Duration) -> Duration {
    match limit.policy() {
        Policy::LeakyBucket(bucket) => {
            let slots = u32::try_from(bucket.burst().saturating_add(1)).unwrap_or(u32::MAX);
            bucket.interval().saturating_mul(slots)
        }
        _ => decision.reset_after.saturating_sub(elapsed),
    }
}
