//! The store's own bookkeeping, checked from inside: counts kept up to date match counts
//! made from scratch.

use super::*;
use crate::{ManualClock, SlidingLog, SlidingLogVariant, TokenBucket, TokenBucketSettings};
use proptest::prelude::*;
use std::time::Duration;

/// What a step of [`the_bytes_counted_as_states_come_and_go_are_the_bytes_held`] does.
#[derive(Clone, Debug)]
enum Step {
    /// Key `.0` (of `.1` bytes), limits from `.2`, cost `.3`.
    Check(u8, usize, u8, u64),
    Reset(u8, usize),
    /// Moves the store's clock on by this many ms.
    Advance(u64),
    Sweep,
}

fn step() -> impl Strategy<Value = Step> {
    let length = prop_oneof![Just(3), Just(16), Just(40), Just(1_024)];
    prop_oneof![
        8 => (any::<u8>(), length.clone(), 0u8..4, 0u64..8).prop_map(|(k, l, s, c)| Step::Check(k, l, s, c)),
        1 => (any::<u8>(), length).prop_map(|(k, l)| Step::Reset(k, l)),
        1 => (0u64..3_000).prop_map(Step::Advance),
        1 => Just(Step::Sweep),
    ]
}

/// Limits of every shape of state: a small value, and a log that grows on the heap;
/// some made per key (as Envoy overrides are), so that tables come and go.
fn limits_for(selector: u8, key: u8) -> Vec<Limit> {
    let bucket = TokenBucketSettings { capacity: 5, refill_amount: 1, refill_interval: Duration::from_millis(500) };
    let log =
        SlidingLog::new(40, Duration::from_secs(2), SlidingLogVariant::Attempts).unwrap_or_else(|e| panic!("{e}"));
    let own = TokenBucketSettings { capacity: u64::from(key % 5) + 2, ..bucket };
    let bucket = Limit::new("bucket", TokenBucket::new(bucket).unwrap_or_else(|e| panic!("{e}")));
    let own = Limit::new("own", TokenBucket::new(own).unwrap_or_else(|e| panic!("{e}")));
    match selector {
        0 => vec![bucket],
        1 => vec![Limit::new("log", log)],
        2 => vec![own],
        _ => vec![bucket, Limit::new("log", log), own],
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Each shard's running count of bytes is what counting from scratch finds, and the
    /// store stays within its caps.
    #[test]
    fn the_bytes_counted_as_states_come_and_go_are_the_bytes_held(
        steps in prop::collection::vec(step(), 1..300),
        max_keys in 8usize..64,
    ) {
        let clock = ManualClock::at(Timestamp::from_micros(1_700_000_000_000_000));
        let store = MemoryStore::builder().clock(clock.clone()).max_keys(max_keys).max_memory(80 << 10).shards(1).build();
        for step in steps {
            match step {
                Step::Check(key, len, selector, cost) => {
                    let bytes = vec![key; len];
                    let key_of = Key::new(&bytes).unwrap_or_else(|e| panic!("{e}"));
                    match store.check_now(key_of, &limits_for(selector, key), crate::Clock::now(&clock), cost) {
                        Ok(_) | Err(StoreError::Full { .. }) => {}
                        Err(error) => prop_assert!(false, "{error}"),
                    }
                }
                Step::Reset(key, len) => {
                    let bytes = vec![key; len];
                    store.reset_now(Key::new(&bytes).unwrap_or_else(|e| panic!("{e}")), &limits_for(3, key));
                }
                Step::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                Step::Sweep => {
                    store.sweep();
                }
            }
            {
                let shard = store.inner.shards[0].0.lock();
                prop_assert_eq!(shard.bytes, shard.heap_bytes());
                prop_assert!(shard.states <= max_keys + 3, "{} states", shard.states);
                prop_assert_eq!(shard.states, shard.tables.iter().map(|(_, t)| t.len()).sum::<usize>());
                prop_assert!(shard.tables.iter().all(|(_, t)| !t.is_empty()), "an empty table is kept");
            }
            let by_name = store.len_by_name();
            prop_assert_eq!(by_name.values().sum::<usize>(), store.len());
            prop_assert!(by_name.values().all(|count| *count > 0), "{:?}", by_name);
        }
    }
}

/// Each shard allocates one of these per limit it serves: with 1 000 keys over 32 shards
/// that is about 6 bytes per key, so the per-key targets (48 bytes for a token bucket,
/// 64 for a sliding log, with 16-byte keys) hold only while it stays this small. The
/// whole `Limit` here (its policy a second copy of the table's) cost 1.3 bytes per key.
#[test]
fn a_shards_table_and_its_owner_fit_in_184_bytes() {
    let size = size_of::<(shard_tables::TableOwner, limit_table::LimitTable)>();
    assert!(size <= 184, "{size} bytes");
}

/// Each limit's states are counted under its name, one per key, across shards.
#[test]
fn the_states_of_each_limit_are_counted_by_name() {
    let store = MemoryStore::new();
    let now = Timestamp::from_micros(1_700_000_000_000_000);
    for key in 0..1_000u32 {
        let bytes = key.to_le_bytes();
        let key = Key::new(&bytes).unwrap_or_else(|e| panic!("{e}"));
        let limits = limits_for(if key.as_bytes()[0].is_multiple_of(2) { 0 } else { 3 }, 1);
        store.check_now(key, &limits, now, 1).unwrap_or_else(|e| panic!("{e}"));
    }
    let by_name: Vec<(String, usize)> =
        store.len_by_name().into_iter().map(|(name, count)| (name.to_string(), count)).collect();
    let expected = [("bucket".to_owned(), 1_000), ("log".to_owned(), 500), ("own".to_owned(), 500)];
    assert_eq!(by_name, expected);
}
