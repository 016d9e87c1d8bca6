//! What the limits checked together allow a lease: whether they can be leased at all, how
//! long its units stay spendable, and what a leased decision may honestly report. Each
//! algorithm states its own terms ([`Algorithm::lease_terms`](crate::Algorithm::lease_terms)).

use crate::{Decision, Limit, Policy, Timestamp};
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
             the variant `accepted` for it",
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
/// let log = SlidingLog::new(100, Duration::from_secs(60), SlidingLogVariant::Attempts)?;
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
    policy.lease_terms().refusal()
}

/// How long after the store's decision `decision` (for the lease's whole cost) units
/// leased under `limit` for `period` may be spent
/// ([`LeaseTerms::valid_for`](crate::algorithm::LeaseTerms::valid_for)).
pub(crate) fn valid_for(limit: &Limit, decision: &Decision, period: Duration) -> Duration {
    limit.policy().lease_terms().valid_for(decision, period)
}

/// The `reset_after` a leased decision reports, `elapsed` after the lease's store decision
/// `decision`: the same instant as the store's, never sooner than the truth. A window's end
/// does not move (fixed window: its end; sliding window: the end of the lease's bucket plus
/// the window, and the lease's bucket is the newest counted one).
pub(crate) fn reset_after(decision: &Decision, elapsed: Duration) -> Duration {
    decision.reset_after.saturating_sub(elapsed)
}

/// Where the store debited a lease of `period` under `limit` (µs, the store's clock): the
/// start of the window or bucket its decision `decision`, made at `decided_at`, counted the
/// units in, or the lease's deadline.
pub(crate) fn debited_in(limit: &Limit, decision: &Decision, decided_at: Timestamp, period: Duration) -> u64 {
    limit.policy().lease_terms().debited_in(decision, decided_at, period)
}
