//! What an algorithm allows a quota lease (docs/leases.md): one value per algorithm, its
//! [`Algorithm::lease_terms`](super::Algorithm::lease_terms).

use crate::{Decision, Timestamp};
use std::time::Duration;

/// How units of an algorithm may be leased: debited by one store decision and spent later
/// by one process without asking the store (docs/leases.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseTerms {
    /// The store's decision debits a lease in one window or bucket, which holds the units
    /// until it ends, spent or not: they may be spent until then. Both durations are
    /// measured back from the instant the decision's `reset_after` names.
    Debited {
        /// From the start of the window or bucket the units were debited in.
        since_start: Duration,
        /// From the end of that window or bucket (when the units stop being spendable).
        after_end: Duration,
    },
    /// The store holds the lease's units apart ([`Holds`](super::Holds)) and counts them as
    /// spent at the worst instant they could be, up to the lease's deadline (the store's
    /// time of the decision plus the lease period): they may be spent until then.
    Held,
    /// The algorithm cannot be leased exactly; the reason says why a lease would admit more
    /// than its definition allows.
    Refused(&'static str),
}

/// A lease's unspent units coming back to one limit's state
/// ([`Algorithm::give_back`](super::Algorithm::give_back)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Returned {
    /// Where the store debited the lease ([`LeaseTerms::debited_in`]): the start of its
    /// window or bucket, or its deadline.
    pub debited_in: u64,
    /// The stamp of the state that debited it ([`Receipt::stamp`](crate::Receipt::stamp)):
    /// a store that stamps its states gives back only to the state of that stamp.
    pub stamp: u64,
    /// The units the lease granted.
    pub leased: u64,
    /// The units given back: those never spent.
    pub unspent: u64,
    /// The store's time of the give-back.
    pub now: Timestamp,
}

impl LeaseTerms {
    /// Why a lease would be inexact, or `None` when one can be granted.
    pub fn refusal(self) -> Option<&'static str> {
        match self {
            LeaseTerms::Debited { .. } | LeaseTerms::Held => None,
            LeaseTerms::Refused(reason) => Some(reason),
        }
    }

    /// How long after the store's `decision` for a lease's whole cost its units may be
    /// spent: to the end of the window or bucket they were debited in (not capped by the
    /// lease period: a unit debited in a window is that window's until it ends, spent or
    /// not; the period sizes leases), or for the lease `period` when the store holds them.
    /// Zero when no lease can be granted.
    pub fn valid_for(self, decision: &Decision, period: Duration) -> Duration {
        match self {
            LeaseTerms::Debited { after_end, .. } => decision.reset_after.saturating_sub(after_end),
            LeaseTerms::Held => period,
            LeaseTerms::Refused(_) => Duration::ZERO,
        }
    }

    /// Where the store debited a lease (µs, the store's clock): the start of the window or
    /// bucket its `decision`, made at `decided_at`, counted the units in, or the lease's
    /// deadline, `period` after the decision, when the store holds them.
    pub fn debited_in(self, decision: &Decision, decided_at: Timestamp, period: Duration) -> u64 {
        let end = decided_at.saturating_add(decision.reset_after).as_micros();
        let since_start = match self {
            LeaseTerms::Debited { since_start, .. } => since_start,
            LeaseTerms::Held => return decided_at.saturating_add(period).as_micros(),
            LeaseTerms::Refused(_) => Duration::ZERO,
        };
        end.saturating_sub(u64::try_from(since_start.as_micros()).unwrap_or(u64::MAX))
    }
}
