//! A flood of new keys cannot lift a block, nor take the memory store past its bounds
//! (issue 25, items 6 and 7): eviction never drops a limited state, a store full of
//! limited states refuses new keys, `max_memory` bounds the bytes held, and the tables of
//! limits made at run time (Envoy overrides) are found at once and freed with their states.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_core::{
    Alignment, Clock, FixedWindow, Key, LeakMode, LeakyBucket, Limit, ManualClock, MemoryStore, Policy, SlidingLog,
    SlidingLogVariant, SlidingWindow, StoreError, Timestamp, TokenBucket, TokenBucketSettings,
};
use std::time::Duration;

const START: Timestamp = Timestamp::from_micros(1_700_000_000_000_000);

/// Every algorithm, each admitting 3 requests per 15 minutes (or close to it).
fn three_per_quarter_hour() -> Vec<Policy> {
    let quarter = Duration::from_secs(900);
    let bucket = TokenBucketSettings { capacity: 3, refill_amount: 1, refill_interval: quarter };
    vec![
        SlidingLog::new(3, quarter, SlidingLogVariant::Attempts).unwrap().into(),
        SlidingLog::new(3, quarter, SlidingLogVariant::Accepted).unwrap().into(),
        FixedWindow::new(3, quarter, Alignment::Anchored, Duration::ZERO).unwrap().into(),
        SlidingWindow::new(3, quarter, 15).unwrap().into(),
        TokenBucket::new(bucket).unwrap().into(),
        LeakyBucket::new(quarter / 3, 2, LeakMode::NoDelay).unwrap().into(),
    ]
}

/// A token bucket of `capacity` refilled in full each second.
fn per_second(capacity: u64) -> TokenBucketSettings {
    TokenBucketSettings { capacity, refill_amount: capacity, refill_interval: Duration::from_secs(1) }
}

/// Random-looking keys of `len` bytes, as an attacker would send.
fn flood_key(i: u64, len: usize) -> Vec<u8> {
    let word = i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17).to_le_bytes();
    (0..len).map(|at| word[at % 8] ^ (at / 8) as u8).collect()
}

fn check(store: &MemoryStore, key: &[u8], limit: &Limit, now: Timestamp, cost: u64) -> Result<bool, StoreError> {
    Ok(store.check_one(Key::new(key).unwrap(), limit, now, cost)?.allowed)
}

/// Makes `key` limited under `limit` at `now`: checked until rejected.
fn block(store: &MemoryStore, key: &[u8], limit: &Limit, now: Timestamp) {
    for _ in 0..100 {
        if !check(store, key, limit, now, 1).unwrap() {
            return;
        }
    }
    panic!("{} never rejects", limit.name());
}

/// The reproduction of issue 25: a client being rejected sends requests under many fresh
/// keys, later than its own, so that their states would become fresh after its state.
#[test]
fn a_limited_key_stays_limited_however_many_new_keys_flood_the_store() {
    for policy in three_per_quarter_hour() {
        let limit = Limit::new("login", policy);
        let clock = ManualClock::at(START);
        let store = MemoryStore::builder().clock(clock.clone()).max_keys(64).shards(1).build();
        block(&store, b"attacker", &limit, START);
        for i in 0..5_000u64 {
            let now = START.saturating_add(Duration::from_millis(i));
            clock.set(now);
            assert!(check(&store, &flood_key(i, 16), &limit, now, 1).unwrap(), "{}: a fresh key", limit.name());
            assert!(store.len() <= 64);
        }
        let now = clock.now();
        assert!(!check(&store, b"attacker", &limit, now, 0).unwrap(), "{}: the block was lifted", limit.name());
        assert!(store.len() >= 60, "{}: the cap is used, not emptied: {}", limit.name(), store.len());
    }
}

#[test]
fn a_store_full_of_limited_keys_refuses_new_keys_until_one_is_freed() {
    for policy in three_per_quarter_hour() {
        let limit = Limit::new("login", policy);
        let clock = ManualClock::at(START);
        let store = MemoryStore::builder().clock(clock.clone()).max_keys(16).shards(1).build();
        for i in 0..16 {
            block(&store, &flood_key(i, 16), &limit, START);
        }
        let refused = check(&store, b"newcomer", &limit, START, 1).unwrap_err();
        assert!(matches!(refused, StoreError::Full { max_keys: 16, .. }), "{}: {refused:?}", limit.name());
        assert!(refused.to_string().contains("full of limited keys"), "{refused}");
        let other = Limit::new("other", TokenBucket::new(per_second(5)).unwrap());
        let both = [limit.clone(), other];
        let refused = store.check_now(Key::new(b"newcomer").unwrap(), &both, START, 1);
        assert!(matches!(refused, Err(StoreError::Full { .. })), "{}: {refused:?}", limit.name());
        // The keys held are still decided, and a peek of a new key needs no room.
        assert!(!check(&store, &flood_key(3, 16), &limit, START, 1).unwrap());
        assert!(check(&store, b"newcomer", &limit, START, 0).unwrap());
        assert_eq!((store.len(), store.tables()), (16, 1), "{}", limit.name());
        // Once the blocks are over by the store's clock, new keys come in again.
        let later = START.saturating_add(Duration::from_secs(900));
        clock.set(later);
        assert!(check(&store, b"newcomer", &limit, later, 1).unwrap(), "{}", limit.name());
        assert!(store.len() <= 16);
    }
}

/// A state that is no longer limited (a token back) but not yet fresh may be dropped, and
/// is, before the limited ones.
#[test]
fn states_no_longer_limited_make_room_before_any_limited_one() {
    let clock = ManualClock::at(START);
    let store = MemoryStore::builder().clock(clock.clone()).max_keys(16).shards(1).build();
    let slow = TokenBucketSettings { capacity: 2, refill_amount: 1, refill_interval: Duration::from_secs(60) };
    let limit = Limit::new("slow", TokenBucket::new(slow).unwrap());
    for i in 0..8 {
        block(&store, &flood_key(i, 16), &limit, START);
    }
    let later = START.saturating_add(Duration::from_secs(30));
    for i in 8..16 {
        block(&store, &flood_key(i, 16), &limit, later);
    }
    // At 60 s the first eight have a token back; the last eight are still limited.
    let minute = START.saturating_add(Duration::from_secs(60));
    clock.set(minute);
    for i in 100..108 {
        assert!(check(&store, &flood_key(i, 16), &limit, minute, 1).unwrap());
    }
    for i in 8..16 {
        assert!(!check(&store, &flood_key(i, 16), &limit, minute, 0).unwrap(), "limited key {i} was dropped");
    }
    assert!(store.len() <= 16);
}

#[test]
fn memory_stays_under_max_memory_with_long_keys() {
    const MAX_MEMORY: usize = 256 << 10;
    let clock = ManualClock::at(START);
    let store = MemoryStore::builder().clock(clock.clone()).max_memory(MAX_MEMORY).shards(4).build();
    let limit = Limit::new("api", TokenBucket::new(per_second(10)).unwrap());
    let attacker = flood_key(u64::MAX, 1_024);
    block(&store, &attacker, &limit, START);
    for i in 0..5_000u64 {
        assert!(check(&store, &flood_key(i, 1_024), &limit, START, 1).unwrap());
        if i % 10 == 0 {
            let bytes = store.heap_bytes();
            assert!(bytes <= MAX_MEMORY, "{bytes} bytes held after {i} keys of 1 KiB");
        }
    }
    assert!(store.heap_bytes() <= MAX_MEMORY);
    // About 1.1 KiB a state: most of the room is used.
    assert!(store.len() >= 150, "{} states", store.len());
    assert!(!check(&store, &attacker, &limit, START, 0).unwrap(), "the block was lifted");
}

#[test]
fn a_store_full_of_limited_long_keys_refuses_new_ones_by_memory() {
    const MAX_MEMORY: usize = 64 << 10;
    let clock = ManualClock::at(START);
    let store = MemoryStore::builder().clock(clock.clone()).max_memory(MAX_MEMORY).shards(1).build();
    let limit = Limit::new("once", TokenBucket::new(per_second(1)).unwrap());
    let mut refused = None;
    for i in 0..200u64 {
        match check(&store, &flood_key(i, 1_024), &limit, START, 1) {
            Ok(allowed) => assert!(allowed),
            Err(error) => {
                refused = Some((i, error));
                break;
            }
        }
    }
    let (at, error) = refused.expect("a new key is refused once the memory is full of limited states");
    assert!(matches!(error, StoreError::Full { max_memory: MAX_MEMORY, .. }), "{error:?}");
    assert!(at >= 40, "refused after {at} keys");
    assert!(store.heap_bytes() <= MAX_MEMORY, "{} bytes", store.heap_bytes());
}

// ---- Limits made at run time: one table each, found at once, freed with their states. ----

/// A limit of its own for each `i`, as Envoy's descriptor overrides make them.
fn made_at_run_time(i: u64) -> Limit {
    let window = FixedWindow::new(i + 1, Duration::from_secs(60), Alignment::Aligned, Duration::ZERO).unwrap();
    Limit::new("envoy_override", window)
}

#[test]
fn the_tables_of_thousands_of_limits_are_freed_with_their_states() {
    let clock = ManualClock::at(START);
    let store = MemoryStore::builder().clock(clock.clone()).shards(4).build();
    for i in 0..5_000u64 {
        let limit = made_at_run_time(i);
        assert!(check(&store, format!("descriptor-{}", i % 7).as_bytes(), &limit, START, 1).unwrap());
    }
    assert_eq!(store.len(), 5_000);
    assert!(store.tables() >= 5_000, "{} tables", store.tables());
    assert!(store.tables() <= 4 * 5_000);
    // Each limit's state counts where the request left it.
    assert!(!check(&store, b"descriptor-0", &made_at_run_time(0), START, 1).unwrap());
    clock.set(START.saturating_add(Duration::from_secs(120)));
    assert_eq!(store.sweep(), 5_000);
    assert_eq!((store.len(), store.tables()), (0, 0));
    assert!(store.heap_bytes() < 4 * 1_024, "{} bytes left", store.heap_bytes());
}

#[test]
fn a_limit_that_stores_nothing_leaves_no_table() {
    let store = MemoryStore::builder().clock(ManualClock::at(START)).shards(4).build();
    for i in 0..1_000u64 {
        let limit = made_at_run_time(i);
        assert!(check(&store, b"peeker", &limit, START, 0).unwrap());
        let verdict = store.check_now(Key::new(b"peeker").unwrap(), &[limit, made_at_run_time(0)], START, 1);
        assert_eq!(verdict.unwrap().decision.allowed, i == 0);
    }
    // Only the first request was allowed (under both limits, one and the same): one state.
    assert_eq!((store.len(), store.tables()), (1, 1));
    assert_eq!(store.reset_now(Key::new(b"peeker").unwrap(), &[made_at_run_time(0), made_at_run_time(1)]), 1);
    assert_eq!((store.len(), store.tables()), (0, 0));
}

#[test]
fn tables_count_against_max_memory() {
    const MAX_MEMORY: usize = 256 << 10;
    let clock = ManualClock::at(START);
    let store = MemoryStore::builder().clock(clock).max_memory(MAX_MEMORY).shards(1).build();
    for i in 0..5_000u64 {
        assert!(check(&store, b"one-key", &made_at_run_time(i), START, 1).unwrap());
        if i % 50 == 0 {
            assert!(store.heap_bytes() <= MAX_MEMORY, "{} bytes after {i} limits", store.heap_bytes());
        }
    }
    assert!(store.tables() < 5_000, "{} tables held in {MAX_MEMORY} bytes", store.tables());
}
