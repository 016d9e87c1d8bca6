//! Memory stays bounded: fresh states are freed and the key cap holds under a flood.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use sluice_core::{
    Key, Limit, ManualClock, MemoryStore, SlidingLog, SlidingLogVariant, Timestamp, TokenBucket, TokenBucketSettings,
};
use std::time::Duration;

fn flood_key(i: u64) -> String {
    // Random-looking keys, as an attacker would send.
    format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17))
}

#[test]
fn flooding_random_keys_never_exceeds_the_cap() {
    let clock = ManualClock::at(Timestamp::from_micros(1_000_000));
    let store = MemoryStore::builder().clock(clock.clone()).max_keys(1_000).shards(8).build();
    let bucket = TokenBucketSettings { capacity: 10, refill_amount: 1, refill_interval: Duration::from_secs(3600) };
    let limit = [Limit::new("api", TokenBucket::new(bucket).unwrap())];
    let now = clock.now_timestamp();
    for i in 0..50_000u64 {
        let key = flood_key(i);
        assert!(store.check_now(Key::new(key.as_bytes()).unwrap(), &limit, now, 1).unwrap().decision.allowed);
        if i % 97 == 0 {
            assert!(store.len() <= 1_000, "{} states after {i} keys", store.len());
        }
    }
    assert!(store.len() <= 1_000);
    assert!(store.len() >= 900, "the cap is used, not emptied: {}", store.len());
}

/// A full store makes room only to insert: a check of a key it holds is decided on that
/// key's state, even when that state is the one that would become fresh soonest (the one
/// making room would drop first).
#[test]
fn a_full_store_keeps_the_state_of_the_key_it_checks() {
    let (store, now) = one_shard_of_16();
    let limit = [Limit::new("api", TokenBucket::new(an_hour(2)).unwrap())];
    let soonest = Key::new(b"soonest").unwrap();
    assert_eq!(store.check_now(soonest, &limit, now, 1).unwrap().decision.remaining, 1);
    // Fifteen more keys, each with both tokens used: they refill later than `soonest`.
    fill_with_other_keys(&store, &limit[0], now, 2);
    let second = store.check_now(soonest, &limit, now, 1).unwrap().decision;
    assert_eq!((second.allowed, second.remaining), (true, 0), "the checked key's state was dropped");
    assert!(!store.check_now(soonest, &limit, now, 1).unwrap().decision.allowed);
    assert_eq!(store.len(), 16);
}

/// A check of several limits on a full store makes its room before it is judged: a state
/// dropped for room is judged fresh, so the verdict and the state left behind agree.
#[test]
fn a_full_store_decides_several_limits_on_the_states_it_keeps() {
    let (store, now) = one_shard_of_16();
    let wide = Limit::new("wide", TokenBucket::new(an_hour(100)).unwrap());
    let narrow = Limit::new("narrow", TokenBucket::new(an_hour(5)).unwrap());
    let key = Key::new(b"checked").unwrap();
    // The checked key's `narrow` state refills first; fifteen others fill the store.
    store.check_now(key, std::slice::from_ref(&narrow), now, 1).unwrap();
    fill_with_other_keys(&store, &narrow, now, 3);
    let both = [wide, narrow.clone()];
    let verdict = store.check_now(key, &both, now, 1).unwrap();
    assert_eq!(verdict.limit, 1, "the narrow limit binds: {verdict:?}");
    let after = store.check_now(key, std::slice::from_ref(&narrow), now, 0).unwrap().decision;
    assert_eq!(after.remaining, verdict.decision.remaining, "the verdict was made on a state since dropped");
    assert!(store.len() <= 16);
}

/// A store of at most 16 states, all in one shard, and the time its clock stands at.
fn one_shard_of_16() -> (MemoryStore, Timestamp) {
    let clock = ManualClock::at(Timestamp::from_micros(1_000_000));
    (MemoryStore::builder().clock(clock.clone()).max_keys(16).shards(1).build(), clock.now_timestamp())
}

/// A token bucket of `capacity` that refills one token an hour.
fn an_hour(capacity: u64) -> TokenBucketSettings {
    TokenBucketSettings { capacity, refill_amount: 1, refill_interval: Duration::from_secs(3600) }
}

/// Fills the 15 states left of [`one_shard_of_16`] with other keys, each using `cost`.
fn fill_with_other_keys(store: &MemoryStore, limit: &Limit, now: Timestamp, cost: u64) {
    for i in 0..15u64 {
        let key = flood_key(i);
        let verdict = store.check_now(Key::new(key.as_bytes()).unwrap(), std::slice::from_ref(limit), now, cost);
        assert!(verdict.unwrap().decision.allowed);
    }
    assert_eq!(store.len(), 16);
}

#[test]
fn under_a_flood_the_longest_lived_states_are_kept() {
    let clock = ManualClock::at(Timestamp::from_micros(1_000_000_000));
    let store = MemoryStore::builder().clock(clock.clone()).max_keys(64).shards(1).build();
    let limit =
        [Limit::new("login", SlidingLog::new(3, Duration::from_secs(900), SlidingLogVariant::Attempts).unwrap())];
    let start = clock.now_timestamp();
    // A client blocked for the next 15 minutes...
    let hot = Key::new(b"attacker").unwrap();
    for _ in 0..5 {
        store.check_now(hot, &limit, start, 1).unwrap();
    }
    // ...then a flood of one-off keys, each a little later so each expires a little later.
    for i in 0..10_000u64 {
        let key = flood_key(i);
        let at = Timestamp::from_micros(start.as_micros() - 600_000_000 + i);
        store.check_now(Key::new(key.as_bytes()).unwrap(), &limit, at, 1).unwrap();
    }
    let still_blocked = store.check_now(hot, &limit, start, 0).unwrap();
    assert!(!still_blocked.decision.allowed, "the blocked key kept its state through the flood");
}

#[test]
fn fresh_states_are_swept_by_the_store_clock_only() {
    let clock = ManualClock::at(Timestamp::from_micros(0));
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let bucket = TokenBucketSettings { capacity: 2, refill_amount: 1, refill_interval: Duration::from_secs(1) };
    let limit = [Limit::new("api", TokenBucket::new(bucket).unwrap())];
    for i in 0..100u64 {
        let key = flood_key(i);
        store.check_now(Key::new(key.as_bytes()).unwrap(), &limit, Timestamp::from_micros(5_000_000), 1).unwrap();
    }
    // Requests carry later times, but the store's clock has not moved: nothing is dropped.
    assert_eq!(store.sweep(), 0);
    assert_eq!(store.len(), 100);
    clock.set(Timestamp::from_micros(5_999_999));
    assert_eq!(store.sweep(), 0, "one token is still missing");
    clock.set(Timestamp::from_micros(6_000_000));
    assert_eq!(store.sweep(), 100);
    assert!(store.is_empty());
}

#[test]
fn sweeps_run_as_keys_are_added() {
    let clock = ManualClock::at(Timestamp::from_micros(0));
    let store = MemoryStore::builder().clock(clock.clone()).shards(1).build();
    let bucket = TokenBucketSettings { capacity: 2, refill_amount: 1, refill_interval: Duration::from_secs(1) };
    let limit = [Limit::new("api", TokenBucket::new(bucket).unwrap())];
    let add = |range: std::ops::Range<u64>, at: u64| {
        for i in range {
            let key = flood_key(i);
            store.check_now(Key::new(key.as_bytes()).unwrap(), &limit, Timestamp::from_micros(at), 1).unwrap();
        }
    };
    add(0..1_000, 0);
    clock.set(Timestamp::from_micros(2_000_000));
    add(1_000..3_000, 2_000_000);
    // The first thousand expired by the store's clock and were swept while keys were added.
    assert!(store.len() < 3_000, "{} states", store.len());
    assert!(store.len() >= 2_000);
}

#[test]
fn under_steady_churn_the_store_holds_about_the_live_states() {
    // New keys only, 1 000 per 100 ms, on a 2 s window: about 20 000 live at any time. Each
    // sweep keeps states, so a trigger that waits for the shard to double its *total* would
    // never fire again, and the store would grow without bound.
    let clock = ManualClock::at(Timestamp::from_micros(0));
    let store = MemoryStore::builder().clock(clock.clone()).shards(4).build();
    let limit = [Limit::new(
        "api",
        sluice_core::FixedWindow::new(1, Duration::from_secs(2), sluice_core::Alignment::Anchored, Duration::ZERO)
            .unwrap(),
    )];
    let mut most = 0;
    for step in 0..600u64 {
        let now = Timestamp::from_micros(step * 100_000);
        clock.set(now);
        for i in 0..1_000u64 {
            let key = flood_key(step * 1_000 + i);
            store.check_now(Key::new(key.as_bytes()).unwrap(), &limit, now, 1).unwrap();
        }
        most = most.max(store.len());
    }
    assert!(most <= 3 * 21_000, "the store held {most} states for about 20 000 live ones");
}

trait NowTimestamp {
    fn now_timestamp(&self) -> Timestamp;
}

impl NowTimestamp for ManualClock {
    fn now_timestamp(&self) -> Timestamp {
        sluice_core::Clock::now(self)
    }
}

#[test]
fn a_sliding_log_holds_memory_for_its_window_not_for_its_history() {
    use sluice_core::algorithm::Algorithm;
    // 100 000 per second allowed, but requests come one per millisecond: about 1 000 are
    // ever in the window, so the ring must stay near 1 000 slots, not grow to 100 000.
    let policy = SlidingLog::new(100_000, Duration::from_secs(1), SlidingLogVariant::Accepted).unwrap();
    let mut state = Default::default();
    for millisecond in 0..100_000u64 {
        let (decision, next) = policy.step(&state, Timestamp::from_micros(millisecond * 1_000), 1);
        assert!(decision.allowed);
        state = next;
    }
    let held: &sluice_core::algorithm::sliding_log::SlidingLogState = &state;
    assert!(held.len() <= 1_000, "{} entries held", held.len());
    assert!(held.heap_bytes() <= 2_048 * 8, "{} bytes for ~1 000 live entries", held.heap_bytes());
    // After a quiet spell, a few requests shrink it back.
    for i in 0..20u64 {
        state = policy.step(&state, Timestamp::from_micros(200_000_000 + i * 100_000), 1).1;
    }
    assert!(state.heap_bytes() <= 64 * 8, "{} bytes for 10 live entries", state.heap_bytes());
}

#[test]
fn a_sliding_log_of_up_to_four_entries_allocates_nothing() {
    use sluice_core::algorithm::Algorithm;
    let policy = SlidingLog::new(100, Duration::from_secs(1), SlidingLogVariant::Accepted).unwrap();
    let at = |ms: u64| Timestamp::from_micros(1_700_000_000_000_000 + ms * 1_000);
    let mut state: sluice_core::algorithm::sliding_log::SlidingLogState = Default::default();
    for (held, ms) in [0, 10, 20, 30].into_iter().enumerate() {
        state = policy.step(&state, at(ms), 1).1;
        assert_eq!((state.len(), state.heap_bytes()), (held + 1, 0), "inside the state");
    }
    state = policy.step(&state, at(40), 1).1;
    assert_eq!((state.len(), state.heap_bytes()), (5, 8 * 4), "a fifth entry moves the log to 8 heap slots");
    // The entries of 0 and 10 ms have expired: three live and the new one stay on the heap.
    state = policy.step(&state, at(1_015), 1).1;
    assert_eq!((state.len(), state.heap_bytes()), (4, 8 * 4), "four entries stay on the heap");
    // Those of 20 to 40 ms too: with two entries the log comes back inside the state.
    state = policy.step(&state, at(1_045), 1).1;
    assert_eq!((state.len(), state.heap_bytes()), (2, 0), "back inside the state");
    // And still holds them: the one of 1 015 ms counts until 2 015 ms.
    assert_eq!(policy.step(&state, at(2_014), 0).0.remaining, 98);
    assert_eq!(policy.step(&state, at(2_015), 0).0.remaining, 99);
    // A day-long window whose entries span more than 2^32 µs holds them whole, on the heap.
    let daily = SlidingLog::new(100, Duration::from_secs(86_400), SlidingLogVariant::Accepted).unwrap();
    let mut state: sluice_core::algorithm::sliding_log::SlidingLogState = Default::default();
    state = daily.step(&state, at(0), 1).1;
    state = daily.step(&state, at(5_000_000), 1).1;
    assert_eq!((state.len(), state.heap_bytes()), (2, 2 * 8), "two whole timestamps: 2 slots of 8 bytes");
    let (decision, _) = daily.step(&state, at(5_000_000), 0);
    assert_eq!(decision.remaining, 98);
}

/// A long log whose rate settles, rises and falls: every decision matches a plain queue of
/// timestamps (so no rebuild of the ring loses or reorders an entry), and once the rate has
/// settled for a few windows the ring holds little more than its entries.
#[test]
fn a_long_settled_sliding_log_keeps_a_tight_ring() {
    // About 10 000 entries, then 20 000, then 10 000 again, then 5 000: 4-byte slots.
    settle_rise_and_fall(1_000_000, [(100, 4), (50, 3), (100, 4), (200, 4)], 4);
}

/// The same with a two-hour window, whose entries span more than 2^32 µs, so that each
/// slot holds a whole timestamp (8 bytes): about 2 000 entries, then 4 000, 2 000, 1 100.
#[test]
fn a_long_settled_wide_sliding_log_keeps_a_tight_ring() {
    settle_rise_and_fall(7_200_000_000, [(3_600_000, 4), (1_800_000, 3), (3_600_000, 4), (6_500_000, 4)], 8);
}

/// Runs phases of (mean gap between requests in µs, windows) through one log of a window of
/// `window` µs, checking each decision against a queue and the ring's size (`slot_bytes` a
/// slot) after each phase, once it has settled.
fn settle_rise_and_fall(window: u64, phases: [(u64, u64); 4], slot_bytes: usize) {
    use sluice_core::algorithm::Algorithm;
    use std::collections::VecDeque;
    const LIMIT: u64 = 100_000;
    let policy = SlidingLog::new(LIMIT, Duration::from_micros(window), SlidingLogVariant::Accepted).unwrap();
    let mut state = sluice_core::algorithm::sliding_log::SlidingLogState::default();
    let mut model = VecDeque::new();
    let (mut now, mut seed) = (1_700_000_000_000_000_u64, 0x2545_f491_4f6c_dd1d_u64);
    for (mean_gap, windows) in phases {
        for _ in 0..windows * window / mean_gap {
            // Gaps of 1 to 2 × mean − 1 µs (xorshift): the count wavers as real traffic does.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            now += 1 + seed % (2 * mean_gap - 1);
            while model.front().is_some_and(|&oldest| oldest + window <= now) {
                model.pop_front();
            }
            let (decision, plan) = policy.decide(&state, Timestamp::from_micros(now), 1);
            assert!(decision.allowed, "{} in the window", model.len());
            policy.record(&mut state, plan, decision.allowed);
            model.push_back(now);
            assert_eq!(decision.remaining, LIMIT - model.len() as u64, "at {now}");
        }
        let len = state.len();
        assert_eq!(len, model.len());
        let slots = state.heap_bytes() / slot_bytes;
        // A settled ring keeps a margin of 1/32 and is rebuilt once more than twice that is
        // free; a growth may have added one more margin since.
        assert!(slots <= len + 3 * len / 32 + 8, "{slots} slots for {len} entries (mean gap {mean_gap} µs)");
        assert!(slots >= len, "{slots} slots for {len} entries");
    }
}
