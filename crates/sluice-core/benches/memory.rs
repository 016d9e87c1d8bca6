//! Memory per key and per sliding-log slot, counted by the global allocator.
//!
//! A plain program (no criterion): every figure is the change in bytes held by the
//! allocator (requested sizes, not counting the allocator's own overhead) while keys are
//! inserted, divided by the number of keys. Keys are 16 bytes long. States are inserted
//! through `MemoryStore::check_now`, one request of cost 1 per key; governor's keyed
//! limiter is measured the same way with `check_key`. `MemoryStore::heap_bytes()` is
//! printed beside as a cross-check.
//!
//! Run with `cargo bench -p sluice-core --bench memory`.

mod common;

use cap::Cap;
use common::key_bytes;
use governor::{DefaultKeyedRateLimiter, Quota};
use sluice_core::algorithm::sliding_log::SlidingLogState;
use sluice_core::{
    Algorithm, Alignment, FixedWindow, Key, LeakMode, LeakyBucket, Limit, ManualClock, MemoryStore, Policy, SlidingLog,
    SlidingLogVariant, SlidingWindow, Timestamp, TokenBucket, TokenBucketSettings,
};
use std::alloc::System;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

const NOW: Timestamp = Timestamp::from_micros(1_700_000_000_000_000);
const SECOND: Duration = Duration::from_secs(1);
const KEY_COUNTS: [usize; 2] = [1_000, 1_000_000];
const SLOTS: u64 = 100_000;

/// A store whose own clock never moves, so sweeps drop nothing while keys are inserted.
fn store() -> MemoryStore {
    MemoryStore::builder().clock(ManualClock::at(Timestamp::EPOCH)).build()
}

fn check(store: &MemoryStore, limit: &Limit, key: &[u8], now: Timestamp) -> bool {
    let key = Key::new(key).expect("valid key");
    let verdict = store.check_now(key, std::slice::from_ref(limit), now, 1).expect("one limit");
    verdict.decision.allowed
}

/// Bytes per key allocated, and `heap_bytes()` per key, after inserting `keys` keys.
fn sluice_per_key(limit: &Limit, keys: usize) -> (f64, f64) {
    let store = store();
    let before = ALLOCATOR.allocated();
    for index in 0..keys {
        assert!(check(&store, limit, &key_bytes(index), NOW));
    }
    let after = ALLOCATOR.allocated();
    assert_eq!(store.len(), keys, "every key must hold a state");
    let per_key = (after - before) as f64 / keys as f64;
    (per_key, store.heap_bytes() as f64 / keys as f64)
}

fn governor_per_key(keys: usize) -> f64 {
    let rate = NonZeroU32::new(100).expect("non-zero");
    let limiter = DefaultKeyedRateLimiter::<[u8; 16]>::keyed(Quota::per_second(rate));
    let before = ALLOCATOR.allocated();
    for index in 0..keys {
        assert!(limiter.check_key(&key_bytes(index)).is_ok());
    }
    let after = ALLOCATOR.allocated();
    assert_eq!(limiter.len(), keys, "every key must hold a state");
    black_box(&limiter);
    (after - before) as f64 / keys as f64
}

fn policies() -> Vec<(&'static str, Policy)> {
    vec![
        ("sliding_log", SlidingLog::new(100, SECOND, SlidingLogVariant::Accepted).expect("valid").into()),
        ("fixed_window", FixedWindow::new(100, SECOND, Alignment::Aligned, Duration::ZERO).expect("valid").into()),
        ("sliding_window B=1", SlidingWindow::new(100, SECOND, 1).expect("valid").into()),
        (
            "token_bucket",
            TokenBucket::new(TokenBucketSettings { capacity: 100, refill_amount: 100, refill_interval: SECOND })
                .expect("valid")
                .into(),
        ),
        ("leaky_bucket", LeakyBucket::new(Duration::from_millis(10), 100, LeakMode::NoDelay).expect("valid").into()),
    ]
}

/// Slots reserved by a sliding log holding one request.
fn slot_bytes_after_one_request() -> usize {
    let policy = SlidingLog::new(100, SECOND, SlidingLogVariant::Accepted).expect("valid");
    let (_, state) = policy.step(&SlidingLogState::default(), NOW, 1);
    state.heap_bytes()
}

/// Bytes per slot of one key whose log of `SLOTS` entries is full.
fn sliding_log_slots() {
    let policy = SlidingLog::new(SLOTS, SECOND, SlidingLogVariant::Accepted).expect("valid");
    let limit = Limit::new("slots", policy);
    let store = store();
    let key = key_bytes(7);
    let empty = ALLOCATOR.allocated();
    assert!(check(&store, &limit, &key, NOW));
    let one = ALLOCATOR.allocated();
    for _ in 1..SLOTS {
        assert!(check(&store, &limit, &key, NOW));
    }
    let full = ALLOCATOR.allocated();
    assert!(!check(&store, &limit, &key, NOW), "the log must be full");
    let per_slot = (full - one) as f64 / (SLOTS - 1) as f64;
    println!();
    println!("## Sliding log slots (one key, N = {SLOTS}, window 1 s, log full)");
    println!();
    println!("| measure | bytes |");
    println!("| --- | ---: |");
    println!("| store before the key | 0 (baseline) |");
    println!("| key with 1 request (store, tables and key included) | {} |", one - empty);
    println!("| key with {SLOTS} requests (log full) | {} |", full - empty);
    println!("| per slot: (full − 1 request) / {} | {per_slot:.3} |", SLOTS - 1);
    println!("| heap_bytes() with the log full | {} |", store.heap_bytes());
}

/// A log under a large limit whose traffic never pauses for a whole window keeps every
/// entry it ever logged until it holds `limit` of them, though few are live.
fn sliding_log_retention() {
    let policy = SlidingLog::new(SLOTS, SECOND, SlidingLogVariant::Accepted).expect("valid");
    let mut state = SlidingLogState::default();
    let step = Duration::from_millis(100);
    let mut now = NOW;
    let mut remaining = 0;
    let seconds = 10_000;
    for _ in 0..seconds * 10 {
        now = now.saturating_add(step);
        let (decision, plan) = policy.decide(&state, now, 1);
        policy.record(&mut state, plan, decision.allowed);
        remaining = decision.remaining;
    }
    println!();
    println!("## Sliding log retention (one key, N = {SLOTS} per 1 s, 10 requests/s for {seconds} s, pure core)");
    println!();
    println!("| measure | value |");
    println!("| --- | ---: |");
    println!("| live entries after the last request (N − remaining) | {} |", SLOTS - remaining);
    println!("| entries held (SlidingLogState::len) | {} |", state.len());
    println!("| heap bytes held | {} |", state.heap_bytes());
}

/// Bytes of one table entry for `algorithm` (a 16-byte key stored as is, and its state),
/// and the bytes its state holds outside the entry after one request (the sliding log's
/// ring).
fn entry_bytes(name: &str) -> (usize, usize) {
    use sluice_core::algorithm::{fixed_window, leaky_bucket, sliding_window, token_bucket};
    let state = match name {
        "sliding_log" => size_of::<SlidingLogState>(),
        "fixed_window" => size_of::<fixed_window::WindowCount>(),
        "token_bucket" => size_of::<token_bucket::Tokens>(),
        "leaky_bucket" => size_of::<leaky_bucket::Tat>(),
        _ => size_of::<sliding_window::BucketCounts>(),
    };
    let outside = if name == "sliding_log" { slot_bytes_after_one_request() } else { 0 };
    (16 + state.next_multiple_of(8), outside)
}

fn main() {
    // Criterion-style flags (`--bench`) are passed by `cargo bench`; there is nothing to parse.
    let slot_bytes = slot_bytes_after_one_request();
    println!("## Bytes per key (16-byte keys, one request per key, through the store)");
    println!();
    println!(
        "| algorithm | keys | allocated bytes/key | heap_bytes()/key | entry (key + state) | index, spare capacity and shard tables |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    let mut layouts = Vec::new();
    for (name, policy) in policies() {
        let limit = Limit::new(name, policy);
        let (entry, outside) = entry_bytes(name);
        for keys in KEY_COUNTS {
            let (per_key, heap) = sluice_per_key(&limit, keys);
            let rest = per_key - (entry + outside) as f64;
            println!("| {name} | {keys} | {per_key:.1} | {heap:.1} | {entry} | {rest:.1} |");
        }
        layouts.push((name, entry, outside));
    }
    for keys in KEY_COUNTS {
        println!("| governor keyed (DashMap, [u8; 16]) | {keys} | {:.1} | n/a | | |", governor_per_key(keys));
    }
    println!();
    println!("## Bytes per key at the extremes of the layout");
    println!();
    println!("An entry costs its size, plus up to 1/8 of spare capacity in its vector, plus one");
    println!("4-byte index slot per 0.4 to 0.8 entries (the index doubles when 4/5 full).");
    println!();
    println!(
        "| algorithm | entry | outside the entry | least (index 80 % full, no spare) | most (index 40 % full, 1/8 spare) |"
    );
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (name, entry, outside) in layouts {
        let least = entry as f64 + 4.0 / 0.8 + outside as f64;
        let most = entry as f64 * 1.125 + 4.0 / 0.4 + outside as f64;
        println!("| {name} | {entry} | {outside} | {least:.1} | {most:.1} |");
    }
    println!();
    println!(
        "A sliding-log key holding one request has {slot_bytes} bytes of slots on the heap (up to four narrow entries stay inside its state)."
    );
    sliding_log_slots();
    sliding_log_retention();
}
