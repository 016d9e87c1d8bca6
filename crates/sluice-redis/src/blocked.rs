//! A local cache of keys Redis rejected until a known time (seed 004: "an ephemeral
//! in-memory cache to block requests without hitting Redis while the limiter is hot").
//!
//! It answers only what Redis would answer. It keeps rejections of cost-1 requests (and of
//! peeks that say no): while a cost-1 request is rejected, nothing at all can be admitted
//! for that key, by any server, so the state cannot change until the rejection's
//! `retry_after` has passed, and every field of the decision follows from the elapsed time.
//! It serves only requests of cost 0 or 1, and never limit sets that record rejected
//! attempts (the sliding log's `attempts` variant), whose every attempt changes the state.

use parking_lot::Mutex;
use sluice::{Limit, RetryAfter, Source, Verdict};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Entries kept at most; past it, expired ones are dropped and new ones skipped.
const CAPACITY: usize = 65_536;

#[derive(Debug, Default)]
pub(crate) struct BlockedCache {
    entries: Mutex<HashMap<Vec<u8>, Blocked>>,
}

#[derive(Clone, Copy, Debug)]
struct Blocked {
    verdict: Verdict,
    /// The time (µs) Redis decided at.
    decided_at: u64,
    /// When a cost-1 request passes again (µs, Redis's or the caller's timeline).
    until: u64,
    /// When the reply arrived here, to count elapsed time under Redis `TIME`.
    seen: Instant,
}

/// Where the cache reads elapsed time from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Now {
    /// The caller's `now` (application clock or injected time).
    Caller(u64),
    /// Redis `TIME`: elapsed time is counted locally since the reply.
    Redis,
}

impl BlockedCache {
    /// The cached verdict for this check, if Redis would certainly give it.
    pub(crate) fn lookup(&self, id: &[u8], now: Now, cost: u64) -> Option<Verdict> {
        if cost > 1 {
            return None;
        }
        let mut entries = self.entries.lock();
        let entry = *entries.get(id)?;
        let at = match now {
            Now::Caller(at) if at < entry.decided_at => return None,
            Now::Caller(at) => at,
            Now::Redis => entry.decided_at.saturating_add(micros(entry.seen.elapsed())),
        };
        if at >= entry.until {
            entries.remove(id);
            return None;
        }
        Some(entry.answer_at(at))
    }

    /// Remembers a verdict Redis gave at `decided_at`, if it can be answered locally later
    /// (`None`: nothing to remember, and any earlier entry is stale).
    pub(crate) fn remember(&self, id: Vec<u8>, limits: &[Limit], verdict: Option<Verdict>, decided_at: u64, cost: u64) {
        let Some((verdict, wait)) = verdict.and_then(|verdict| match verdict.decision.retry_after {
            Some(RetryAfter::After(wait)) => Some((verdict, wait)),
            _ => None,
        }) else {
            self.entries.lock().remove(&id);
            return;
        };
        if cost > 1 || limits.iter().any(|limit| limit.policy().records_rejections()) {
            return;
        }
        let entry =
            Blocked { verdict, decided_at, until: decided_at.saturating_add(micros(wait)), seen: Instant::now() };
        let mut entries = self.entries.lock();
        if entries.len() >= CAPACITY {
            entries.retain(|_, entry| entry.seen.elapsed() < Duration::from_micros(entry.until - entry.decided_at));
        }
        if entries.len() < CAPACITY {
            entries.insert(id, entry);
        }
    }

    /// Forgets every cached verdict that involves one of `state_keys` (state keys of one
    /// caller key, so all of one length).
    pub(crate) fn forget(&self, state_keys: &[Vec<u8>]) {
        // A cache id is the state keys of one check joined by a zero byte; cutting it into
        // pieces of one state key's length plus the separator finds them whatever bytes the
        // caller's key holds. An id of another caller key is dropped only if a piece matches
        // exactly, which costs one round trip at worst.
        let involves = |id: &[u8], state_key: &[u8]| {
            id.chunks(state_key.len() + 1).any(|piece| piece.strip_suffix(&[0]).unwrap_or(piece) == state_key)
        };
        let mut entries = self.entries.lock();
        entries.retain(|id, _| !state_keys.iter().any(|state_key| involves(id, state_key)));
    }
}

impl Blocked {
    /// The verdict Redis would give at `at` (before `until`): the same, with every wait
    /// shortened by the time elapsed since Redis decided.
    fn answer_at(&self, at: u64) -> Verdict {
        let elapsed = Duration::from_micros(at - self.decided_at);
        let mut verdict = Verdict { source: Source::Cache, ..self.verdict };
        let decision = &mut verdict.decision;
        decision.reset_after = decision.reset_after.saturating_sub(elapsed);
        decision.retry_after = Some(RetryAfter::After(Duration::from_micros(self.until - at)));
        verdict
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}
