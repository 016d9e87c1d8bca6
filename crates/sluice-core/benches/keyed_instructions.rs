//! A driver for counting instructions per keyed check (callgrind), Sluice's memory store
//! against governor, on the workload of the `keyed` bench: 16-byte keys visited in a
//! pseudo-random order, the clock read included, every check allowed (unless told otherwise).
//!
//! ```sh
//! cargo bench -p sluice-core --bench keyed_instructions --no-run   # prints the binary's path
//! valgrind --tool=callgrind --toggle-collect='keyed_instructions::sluice_checks' \
//!     <binary> 1000 200000 sliding_log        # keys, checks, algorithm
//! valgrind --tool=callgrind --toggle-collect='keyed_instructions::governor_checks' \
//!     <binary> 1000 200000 sliding_log
//! ```
//!
//! Instructions per check = callgrind's total ÷ checks. Algorithms: `sliding_log`,
//! `token_bucket`, `fixed_window`, `leaky_bucket`, `sliding_window` (one bucket per window)
//! and `sliding_window_10` (ten buckets). Run without valgrind, it prints the
//! time per check of both (a rough figure: use the `keyed` bench for times).
//!
//! A fourth argument, `ns_per_check`, replaces Sluice's clock with simulated time advancing
//! that much per check. Under valgrind a check takes about 50 times longer, so a sliding log
//! on the real clock holds 50 times fewer entries than in a native run; with simulated time
//! its logs are as long as in a native run at that speed, and the counts repeat from run to
//! run. Simulated time first runs one window (1 s) of checks, not counted, so that logs have
//! reached their steady-state length. A fifth, `limit`, sets the limit per second (by default
//! `max(100, 50 000 000 / keys)`, so that every check is allowed); `1000 300000 sliding_log
//! 100 100` keeps every key far over its limit.
//!
//! Measured with this driver and not kept (the code is in git history):
//! - A leaky bucket by a reciprocal (`18e5f56`, reverted in `a299920`): no difference with
//!   checks 1 µs apart.
//! - The four oldest log entries counted without a branch: 410 → 439 instructions, no gain in
//!   time.
//! - The full shard's path out of line (`#[cold]`): sliding log 438 and token bucket 365
//!   instructions, against 417 and 347.
//! - An algorithm's `settle` called out of line: the token bucket at 403 instead of 351; and an
//!   `Option` for a fresh grid's counters: the sliding window at 536 instead of 532. At
//!   `eb90f1c` every algorithm was 5 to 7 % dearer because `MemoryStore::check_one`, which
//!   inlines every table's `settle`, moved each decision through memory (14 → 22 instructions
//!   per check); `abed5be` inlined it again.

mod common;

use common::key_bytes;
use governor::{DefaultKeyedRateLimiter, Quota};
use sluice_core::{
    Alignment, Clock, FixedWindow, Key, LeakMode, LeakyBucket, Limit, ManualClock, MemoryStore, Policy, SlidingLog,
    SlidingLogVariant, SlidingWindow, SystemClock, Timestamp, TokenBucket, TokenBucketSettings,
};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::ops::Range;
use std::time::{Duration, Instant};

/// xorshift64 and a multiply-shift: the next key index, without allocating.
fn next(state: &mut u64, keys: usize) -> usize {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    ((u128::from(*state) * keys as u128) >> 64) as usize
}

/// Where Sluice's checks get their time.
enum Time {
    /// The clock, read for every check.
    Clock(SystemClock),
    /// `start` plus `ns_per_check` for every check made before.
    Simulated { start: u64, ns_per_check: u64 },
}

impl Time {
    #[inline(always)]
    fn at(&self, check: u64) -> Timestamp {
        match self {
            Time::Clock(clock) => clock.now(),
            Time::Simulated { start, ns_per_check } => Timestamp::from_micros(start + check * ns_per_check / 1_000),
        }
    }
}

/// Checks numbered `checks` (their time comes from `time`), keys in a pseudo-random order.
#[inline(always)]
fn run_checks(store: &MemoryStore, limit: &Limit, time: &Time, keys: &[[u8; 16]], checks: Range<u64>) -> u64 {
    let mut walk = 0x9e37_79b9_7f4a_7c15 ^ checks.start;
    let mut allowed = 0;
    for check in checks {
        let key = Key::new(&keys[next(&mut walk, keys.len())]).expect("16-byte key");
        allowed += u64::from(store.check_one(key, limit, time.at(check), 1).is_ok_and(|decision| decision.allowed));
    }
    allowed
}

/// The checks counted.
#[inline(never)]
fn sluice_checks(store: &MemoryStore, limit: &Limit, time: &Time, keys: &[[u8; 16]], checks: Range<u64>) -> u64 {
    run_checks(store, limit, time, keys, checks)
}

/// With simulated time, one window of checks before counting, so that sliding logs are at
/// their steady-state length (not counted: a different function).
#[inline(never)]
fn warm_up(store: &MemoryStore, limit: &Limit, time: &Time, keys: &[[u8; 16]], checks: Range<u64>) -> u64 {
    run_checks(store, limit, time, keys, checks)
}

#[inline(never)]
fn governor_checks(governor: &DefaultKeyedRateLimiter<[u8; 16]>, keys: &[[u8; 16]], checks: usize) -> u64 {
    let mut walk = 0x9e37_79b9_7f4a_7c15;
    let mut allowed = 0;
    for _ in 0..checks {
        allowed += u64::from(governor.check_key(&keys[next(&mut walk, keys.len())]).is_ok());
    }
    allowed
}

fn policy(algorithm: &str, per_second: u64) -> Policy {
    let second = Duration::from_secs(1);
    let policy: Result<Policy, _> = match algorithm {
        "token_bucket" => TokenBucket::new(TokenBucketSettings {
            capacity: per_second,
            refill_amount: per_second,
            refill_interval: second,
        })
        .map(Policy::from),
        "fixed_window" => FixedWindow::new(per_second, second, Alignment::Aligned, Duration::ZERO).map(Policy::from),
        // The interval in whole microseconds (a policy's resolution), at least one.
        "leaky_bucket" => {
            LeakyBucket::new(Duration::from_micros((1_000_000 / per_second).max(1)), per_second, LeakMode::NoDelay)
                .map(Policy::from)
        }
        "sliding_window" => SlidingWindow::new(per_second, second, 1).map(Policy::from),
        "sliding_window_10" => SlidingWindow::new(per_second, second, 10).map(Policy::from),
        _ => SlidingLog::new(per_second, second, SlidingLogVariant::Accepted).map(Policy::from),
    };
    policy.expect("valid policy")
}

fn main() {
    // `cargo bench` passes `--bench`; the other arguments are positional.
    let args: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with("--")).collect();
    let keys: usize = args.first().map_or(1_000, |arg| arg.parse().expect("keys"));
    let checks: usize = args.get(1).map_or(1_000_000, |arg| arg.parse().expect("checks"));
    let algorithm = args.get(2).map_or("sliding_log", String::as_str);
    let per_second = match args.get(4) {
        Some(limit) => limit.parse().expect("limit per second"),
        None => (50_000_000 / keys).max(100) as u32,
    };
    let keys: Vec<[u8; 16]> = (0..keys).map(key_bytes).collect();
    let limit = Limit::new("bench", policy(algorithm, u64::from(per_second)));
    let clock = SystemClock::new();
    let time = match args.get(3) {
        Some(ns) => Time::Simulated { start: clock.now().as_micros(), ns_per_check: ns.parse().expect("ns_per_check") },
        None => Time::Clock(clock),
    };
    // The store's own clock, by which it drops expired states, stands still: with simulated
    // time it must not drop what the simulated time still holds.
    let store = MemoryStore::builder().clock(ManualClock::at(Timestamp::EPOCH)).build();
    let rate = NonZeroU32::new(per_second).expect("non-zero rate");
    let governor = DefaultKeyedRateLimiter::<[u8; 16]>::keyed(Quota::per_second(rate));
    for key in &keys {
        black_box(
            store.check_one(Key::new(key).expect("16-byte key"), &limit, time.at(0), 1).expect("room for every key"),
        );
        black_box(governor.check_key(key).is_ok());
    }
    let warm = match time {
        Time::Simulated { ns_per_check, .. } => 1_000_000_000 / ns_per_check,
        Time::Clock(_) => 0,
    };
    black_box(warm_up(&store, &limit, &time, &keys, 1..warm));
    let started = Instant::now();
    let sluice = black_box(sluice_checks(&store, &limit, &time, &keys, warm..warm + checks as u64));
    let sluice_time = started.elapsed();
    let started = Instant::now();
    let governor = black_box(governor_checks(&governor, &keys, checks));
    let governor_time = started.elapsed();
    let per_check = |time: Duration| time.as_nanos() as f64 / checks as f64;
    println!(
        "{algorithm}, {} keys: sluice {:.1} ns/check ({sluice} allowed), governor {:.1} ns/check ({governor} allowed), store {:.1} MB",
        keys.len(),
        per_check(sluice_time),
        per_check(governor_time),
        store.heap_bytes() as f64 / 1e6
    );
}
