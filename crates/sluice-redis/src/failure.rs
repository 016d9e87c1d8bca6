//! What a check decides when Redis cannot answer.

use sluice_core::{Check, Decision, Limit, MemoryStore, RetryAfter, Source, Timestamp, Verdict};
use std::time::Duration;

/// What to decide while Redis is unreachable or too slow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailureMode {
    /// Allow (the usual advice, and the default): a limiter outage must not become an
    /// outage of the service it protects. Decided as if every state were fresh, so a cost
    /// above the limit is still refused.
    #[default]
    Open,
    /// Reject, with `retry_after` of the probe interval (100 ms): the soonest this store
    /// can learn that Redis is back. Sources report the rejection as
    /// [`Source::FailedClosed`], so callers answer it as an outage, not as a quota spent
    /// (the tower layer and `sluice serve` answer 503).
    Closed,
    /// Decide with an in-memory store of this process meanwhile (limits then hold per
    /// process instead of across all servers).
    Fallback,
}

impl std::fmt::Display for FailureMode {
    /// The mode's name in configuration: `open`, `closed` or `fallback`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FailureMode::Open => "open",
            FailureMode::Closed => "closed",
            FailureMode::Fallback => "fallback",
        })
    }
}

/// How often a probe asks Redis while a connection is down (the store's channel runs it).
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// How long a request rejected by the `closed` mode is told to wait: until the next probe
/// may have found Redis again.
const CLOSED_RETRY: Duration = PROBE_INTERVAL;

impl FailureMode {
    /// The verdict without Redis; `fallback` holds this process's states meanwhile.
    pub(crate) fn decide(self, fallback: &MemoryStore, check: Check<'_>) -> Option<Verdict> {
        let Check { key, limits, now, cost, .. } = check;
        match self {
            FailureMode::Open => fresh(limits, now, cost, Source::FailedOpen),
            FailureMode::Closed => {
                let mut verdict = fresh(limits, now, cost, Source::FailedClosed)?;
                verdict.decision = verdict.decision.with_remaining(0).rejected(RetryAfter::After(CLOSED_RETRY));
                Some(verdict)
            }
            FailureMode::Fallback => {
                let verdict = fallback.check_now(key, limits, now, cost).ok()?;
                Some(verdict.with_source(Source::Fallback))
            }
        }
    }
}

/// The verdict for keys never seen before.
fn fresh(limits: &[Limit], now: Timestamp, cost: u64, source: Source) -> Option<Verdict> {
    let decisions: Vec<Decision> = limits.iter().map(|limit| limit.policy().decide_fresh(now, cost)).collect();
    Verdict::combine(&decisions).map(|verdict| verdict.with_source(source))
}
