//! A driver for counting instructions per keyed check (callgrind), Sluice's memory store
//! against governor, on the workload of the `keyed` bench: 16-byte keys visited in a
//! pseudo-random order, the clock read included, every check allowed.
//!
//! ```sh
//! cargo bench -p sluice --bench keyed_instructions --no-run   # prints the binary's path
//! valgrind --tool=callgrind --toggle-collect='keyed_instructions::sluice_checks' \
//!     <binary> 1000 200000 sliding_log        # keys, checks, algorithm
//! valgrind --tool=callgrind --toggle-collect='keyed_instructions::governor_checks' \
//!     <binary> 1000 200000 sliding_log
//! ```
//!
//! Instructions per check = callgrind's total ÷ checks. Algorithms: `sliding_log`,
//! `token_bucket`, `fixed_window`, `leaky_bucket`. Run without valgrind, it prints the
//! time per check of both (a rough figure: use the `keyed` bench for times).

mod common;

use common::key_bytes;
use governor::{DefaultKeyedRateLimiter, Quota};
use sluice::{
    Alignment, Clock, FixedWindow, Key, LeakMode, LeakyBucket, Limit, MemoryStore, Policy, SlidingLog,
    SlidingLogVariant, SystemClock, TokenBucket, TokenBucketSettings,
};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

/// xorshift64 and a multiply-shift: the next key index, without allocating.
fn next(state: &mut u64, keys: usize) -> usize {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    ((u128::from(*state) * keys as u128) >> 64) as usize
}

#[inline(never)]
fn sluice_checks(store: &MemoryStore, limit: &Limit, clock: &SystemClock, keys: &[[u8; 16]], checks: usize) -> u64 {
    let mut walk = 0x9e37_79b9_7f4a_7c15;
    let mut allowed = 0;
    for _ in 0..checks {
        let key = Key::new(&keys[next(&mut walk, keys.len())]).expect("16-byte key");
        allowed += u64::from(store.check_one(key, limit, clock.now(), 1).allowed);
    }
    allowed
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
        "leaky_bucket" => LeakyBucket::new(second / per_second as u32, per_second, LeakMode::NoDelay).map(Policy::from),
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
    let per_second = (50_000_000 / keys).max(100) as u32;
    let keys: Vec<[u8; 16]> = (0..keys).map(key_bytes).collect();
    let limit = Limit::new("bench", policy(algorithm, u64::from(per_second)));
    let (store, clock) = (MemoryStore::new(), SystemClock::new());
    let rate = NonZeroU32::new(per_second).expect("non-zero rate");
    let governor = DefaultKeyedRateLimiter::<[u8; 16]>::keyed(Quota::per_second(rate));
    for key in &keys {
        black_box(store.check_one(Key::new(key).expect("16-byte key"), &limit, clock.now(), 1));
        black_box(governor.check_key(key).is_ok());
    }
    let started = Instant::now();
    let sluice = black_box(sluice_checks(&store, &limit, &clock, &keys, checks));
    let sluice_time = started.elapsed();
    let started = Instant::now();
    let governor = black_box(governor_checks(&governor, &keys, checks));
    let governor_time = started.elapsed();
    let per_check = |time: Duration| time.as_nanos() as f64 / checks as f64;
    println!(
        "{algorithm}, {} keys: sluice {:.1} ns/check ({sluice} allowed), governor {:.1} ns/check ({governor} allowed)",
        keys.len(),
        per_check(sluice_time),
        per_check(governor_time)
    );
}
