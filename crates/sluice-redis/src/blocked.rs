//! A local cache of keys Redis rejected until a known time: an ephemeral in-memory cache
//! that blocks requests without a round trip to Redis while the limiter is hot.
//!
//! It answers only what Redis would answer. It keeps rejections of cost-1 requests (and of
//! peeks that say no): while a cost-1 request is rejected, nothing at all can be admitted
//! for that key, by any server, so the state cannot change until the rejection's
//! `retry_after` has passed, and every field of the decision follows from the elapsed time.
//! It serves only requests of cost 0 or 1, and never limit sets that record rejected
//! attempts (the sliding log's `attempts` variant), whose every attempt changes the state.
//!
//! Its only clock is the caller's: the `now` of each check (the limiter's clock, or
//! injected time). Under Redis `TIME` that `now` counts the time elapsed since the check
//! Redis answered, so tests drive the cache with the times they pass, and no sleep.

use parking_lot::Mutex;
use sluice_core::{Limit, RetryAfter, Source, Verdict};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Entries kept at most per shard; past it, expired ones are dropped and new ones skipped.
const SHARD_CAPACITY: usize = 4_096;

/// Shards, each behind its own lock, so that worker threads checking different keys do
/// not wait for one another (every check of cost 0 or 1 looks here first).
const SHARDS: usize = 16;

type Entries = HashMap<Vec<u8>, Blocked, ahash::RandomState>;

#[derive(Debug, Default)]
pub(crate) struct BlockedCache {
    shards: [Mutex<Entries>; SHARDS],
    /// Picks an id's shard.
    spread: ahash::RandomState,
    /// Counts resets ([`BlockedCache::forget`]): a verdict Redis gave before a reset is
    /// not remembered after it.
    generation: AtomicU64,
}

/// The cache's generation when a check asked Redis ([`BlockedCache::generation`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Generation(u64);

#[derive(Clone, Copy, Debug)]
struct Blocked {
    verdict: Verdict,
    /// The time (µs) Redis decided at.
    decided_at: u64,
    /// When a cost-1 request passes again (µs, Redis's or the caller's timeline).
    until: u64,
    /// The caller's `now` (µs) for the check Redis answered, to count elapsed time under
    /// Redis `TIME`.
    asked_at: u64,
}

/// The time of a check, as the cache reads it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Now {
    /// The caller's `now` (µs; the limiter's clock or injected time), which Redis decides at.
    Caller(u64),
    /// The caller's `now` (µs), while Redis decides at its `TIME`: the time elapsed since a
    /// remembered check is counted on the caller's clock. Counted from the check's `now`,
    /// before Redis decided, it is never less than Redis's: an answer expires early, never
    /// late.
    Redis(u64),
}

impl BlockedCache {
    /// The cached verdict for this check, if Redis would certainly give it.
    pub(crate) fn lookup(&self, id: &[u8], now: Now, cost: u64) -> Option<Verdict> {
        if cost > 1 {
            return None;
        }
        let mut entries = self.shard(id).lock();
        let entry = *entries.get(id)?;
        let at = match now {
            Now::Caller(at) if at < entry.decided_at => return None,
            Now::Caller(at) => at,
            Now::Redis(at) => entry.decided_at.saturating_add(at.saturating_sub(entry.asked_at)),
        };
        if at >= entry.until {
            entries.remove(id);
            return None;
        }
        Some(entry.answer_at(at))
    }

    /// The generation to pass to [`BlockedCache::remember`], read before asking Redis.
    pub(crate) fn generation(&self) -> Generation {
        Generation(self.generation.load(Ordering::Acquire))
    }

    /// Remembers a verdict Redis gave at `decided_at`, if it can be answered locally later
    /// (`None`: nothing to remember, and any earlier entry is stale). `asked` is the
    /// generation read before Redis was asked: when a reset came in between, Redis may
    /// have decided before it, and the verdict is not kept.
    pub(crate) fn remember(&self, id: Vec<u8>, asked: Generation, verdict: Remembered<'_>) {
        let Remembered { limits, verdict, decided_at, asked_at, cost } = verdict;
        let Some((verdict, wait)) = verdict.and_then(|verdict| match verdict.decision.retry_after {
            Some(RetryAfter::After(wait)) => Some((verdict, wait)),
            _ => None,
        }) else {
            self.shard(&id).lock().remove(&id);
            return;
        };
        if cost > 1 || limits.iter().any(|limit| limit.policy().records_rejections()) {
            return;
        }
        let entry = Blocked { verdict, decided_at, until: decided_at.saturating_add(micros(wait)), asked_at };
        let mut entries = self.shard(&id).lock();
        // Read under the shard's lock, which `forget` takes after counting a reset: either
        // this sees the reset, or `forget` sees this entry.
        if self.generation.load(Ordering::Acquire) != asked.0 {
            return;
        }
        if entries.len() >= SHARD_CAPACITY {
            entries.retain(|_, entry| asked_at.saturating_sub(entry.asked_at) < entry.until - entry.decided_at);
        }
        if entries.len() < SHARD_CAPACITY {
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
        self.generation.fetch_add(1, Ordering::AcqRel);
        for shard in &self.shards {
            shard.lock().retain(|id, _| !state_keys.iter().any(|state_key| involves(id, state_key)));
        }
    }

    fn shard(&self, id: &[u8]) -> &Mutex<Entries> {
        // The low bits of a 64-bit hash; SHARDS divides 2^64, so every shard is as likely.
        &self.shards[(self.spread.hash_one(id) % SHARDS as u64) as usize]
    }
}

/// What [`BlockedCache::remember`] is told of one check.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Remembered<'a> {
    /// The limits checked.
    pub(crate) limits: &'a [Limit],
    /// The verdict, if it may be cached at all.
    pub(crate) verdict: Option<Verdict>,
    /// The time (µs) Redis decided at.
    pub(crate) decided_at: u64,
    /// The caller's `now` (µs) for the check.
    pub(crate) asked_at: u64,
    /// The check's cost.
    pub(crate) cost: u64,
}

impl Blocked {
    /// The verdict Redis would give at `at` (before `until`): the same, with every wait
    /// shortened by the time elapsed since Redis decided.
    fn answer_at(&self, at: u64) -> Verdict {
        let elapsed = Duration::from_micros(at - self.decided_at);
        let mut verdict = self.verdict.with_source(Source::Cache);
        let decision = &mut verdict.decision;
        decision.reset_after = decision.reset_after.saturating_sub(elapsed);
        decision.retry_after = Some(RetryAfter::After(Duration::from_micros(self.until - at)));
        verdict
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{Alignment, Decision, FixedWindow, Quota};

    const ID: &[u8] = b"state-key";

    fn rejected_until(wait: Duration) -> Verdict {
        let decision = Decision::allowed(Quota { limit: 1, remaining: 0 }, wait).rejected(RetryAfter::After(wait));
        Verdict::new(decision, 0, Source::Store)
    }

    fn one_per_minute() -> Limit {
        let window = FixedWindow::new(1, Duration::from_secs(60), Alignment::Aligned, Duration::ZERO);
        Limit::new("one", window.unwrap())
    }

    fn remember(cache: &BlockedCache, limits: &[Limit], asked: Generation) {
        let verdict = Some(rejected_until(Duration::from_secs(60)));
        cache.remember(ID.to_vec(), asked, Remembered { limits, verdict, decided_at: 1_000, asked_at: 1_000, cost: 1 });
    }

    #[test]
    fn a_rejection_is_answered_until_its_retry_time() {
        let cache = BlockedCache::default();
        let limits = [one_per_minute()];
        remember(&cache, &limits, cache.generation());
        let answer = cache.lookup(ID, Now::Caller(2_000), 1).expect("cached");
        assert_eq!(answer.source, Source::Cache);
        assert_eq!(answer.decision.retry_after, Some(RetryAfter::After(Duration::from_micros(60_000_000 - 1_000))));
        assert!(cache.lookup(ID, Now::Caller(2_000), 2).is_none(), "a cost over 1 asks Redis");
        assert!(cache.lookup(ID, Now::Caller(61_000_000), 1).is_none(), "past the retry time");
    }

    #[test]
    fn a_verdict_asked_for_before_a_reset_is_not_remembered_after_it() {
        let cache = BlockedCache::default();
        let limits = [one_per_minute()];
        let asked = cache.generation();
        // The reset lands while the check is in flight, and its reply comes back after.
        cache.forget(&[ID.to_vec()]);
        remember(&cache, &limits, asked);
        assert!(cache.lookup(ID, Now::Caller(2_000), 1).is_none(), "Redis may have decided before the reset");
        remember(&cache, &limits, cache.generation());
        assert!(cache.lookup(ID, Now::Caller(2_000), 1).is_some(), "a check asked after the reset is kept");
        cache.forget(&[ID.to_vec()]);
        assert!(cache.lookup(ID, Now::Caller(2_000), 1).is_none(), "and forgotten by the next reset");
    }

    #[test]
    fn under_redis_time_an_answer_ages_by_the_callers_clock() {
        let cache = BlockedCache::default();
        let limits = [one_per_minute()];
        let verdict = Some(rejected_until(Duration::from_secs(60)));
        // Redis decided at its 9 000 000 µs a check the caller asked at its 1 000 µs.
        let remembered = Remembered { limits: &limits, verdict, decided_at: 9_000_000, asked_at: 1_000, cost: 1 };
        cache.remember(ID.to_vec(), cache.generation(), remembered);
        let answer = cache.lookup(ID, Now::Redis(21_000), 1).expect("cached");
        assert_eq!(answer.decision.retry_after, Some(RetryAfter::After(Duration::from_micros(60_000_000 - 20_000))));
        assert!(cache.lookup(ID, Now::Redis(60_000_999), 1).is_some(), "1 µs before the retry time");
        assert!(cache.lookup(ID, Now::Redis(60_001_000), 1).is_none(), "60 s after the check");
    }

    #[test]
    fn a_full_shard_drops_the_answers_that_expired_on_the_callers_clock() {
        let cache = BlockedCache::default();
        let limits = [one_per_minute()];
        let verdict = Some(rejected_until(Duration::from_secs(60)));
        let in_one_shard = |id: &Vec<u8>| cache.spread.hash_one(id.as_slice()) % SHARDS as u64 == 0;
        let ids: Vec<Vec<u8>> =
            (0_u32..).map(|n| n.to_be_bytes().to_vec()).filter(in_one_shard).take(SHARD_CAPACITY + 1).collect();
        let remember = |id: &Vec<u8>, asked_at| {
            let remembered = Remembered { limits: &limits, verdict, decided_at: asked_at, asked_at, cost: 1 };
            cache.remember(id.clone(), cache.generation(), remembered);
        };
        for id in &ids[..SHARD_CAPACITY] {
            remember(id, 0);
        }
        let (last, first) = (&ids[SHARD_CAPACITY], &ids[0]);
        remember(last, 59_999_999);
        assert!(cache.lookup(last, Now::Redis(59_999_999), 1).is_none(), "full of live answers: skipped");
        remember(last, 60_000_000);
        assert!(cache.lookup(last, Now::Redis(60_000_000), 1).is_some(), "the expired ones made room");
        assert!(cache.lookup(first, Now::Redis(0), 1).is_none(), "and are gone");
    }
}
