//! Snapshots of the memory store: a restored store decides exactly as the one that took the
//! snapshot, changed limits start fresh, `max_keys` holds, and no input makes `restore`
//! panic or insert anything it did not fully check.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use proptest::prelude::*;
use sluice_core::{
    Check, Clock, Key, Limit, LimitId, ManualClock, MemoryStore, SlidingLog, SlidingLogVariant, SlidingWindow,
    SnapshotError, Timestamp, TokenBucket, TokenBucketSettings, Verdict,
};
use std::time::Duration;
use support::{ms, policies};

/// Every algorithm and variant, plus logs and windows large enough to grow their rings.
fn limits() -> Vec<Limit> {
    let mut policies = policies();
    policies.push(SlidingLog::new(40, ms(50), SlidingLogVariant::Accepted).unwrap().into());
    policies.push(SlidingLog::new(40, ms(50), SlidingLogVariant::Attempts).unwrap().into());
    policies.push(SlidingWindow::new(30, ms(50), 10).unwrap().into());
    policies.into_iter().enumerate().map(|(index, policy)| Limit::new(format!("limit-{index}"), policy)).collect()
}

/// Keys of every shape: short, binary with zero bytes, the longest allowed.
fn keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..12).map(|i| format!("user-{i}").into_bytes()).collect();
    keys.push(vec![0, 0xff, b'{', b'}', 0]);
    keys.push(vec![b'k'; Key::MAX_LEN]);
    keys
}

fn store_on(clock: &ManualClock, shards: usize) -> MemoryStore {
    MemoryStore::builder().clock(clock.clone()).shards(shards).build()
}

/// A deterministic stream of (time advance µs, cost, key index, limits choice).
fn requests(seed: u64, count: usize) -> Vec<(u64, u64, usize, usize)> {
    let mut seed = seed;
    (0..count)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // Mostly short steps, so many states are live at any time; now and then a gap
            // longer than every window.
            let advance = match seed % 256 {
                0 => 60_000,
                1..=80 => 0,
                _ => seed % 200,
            };
            (advance, [0, 1, 1, 1, 2, 3][(seed >> 16) as usize % 6], (seed >> 24) as usize, (seed >> 40) as usize)
        })
        .collect()
}

/// Runs `requests` on every store given (the same clock drives them all), a third of them
/// asking for a lease; returns the verdicts, one list per store.
fn run(stores: &[&MemoryStore], clock: &ManualClock, requests: &[(u64, u64, usize, usize)]) -> Vec<Vec<Verdict>> {
    let (limits, keys) = (limits(), keys());
    let mut verdicts = vec![Vec::new(); stores.len()];
    for &(advance, cost, key, choice) in requests {
        clock.advance(Duration::from_micros(advance));
        let key = Key::new(&keys[key % keys.len()]).unwrap();
        // Mostly one limit at a time, sometimes every limit at once (all or nothing).
        let checked = match choice % 8 {
            0 => &limits[..],
            other => std::slice::from_ref(&limits[(choice / 8 + other) % limits.len()]),
        };
        // Now and then a lease: the states then hold leases (logged at their deadlines).
        let check = Check::new(key, checked, clock.now(), cost);
        let check = if choice % 3 == 0 { check.lease(2, ms(20)) } else { check };
        for (store, verdicts) in stores.iter().zip(&mut verdicts) {
            verdicts.push(store.check_and_lease_now(check).unwrap().verdict);
        }
    }
    verdicts
}

#[test]
fn every_algorithm_decides_the_same_after_a_round_trip() {
    let clock = ManualClock::default();
    clock.set(Timestamp::from_micros(1_700_000_000_000_000));
    let original = store_on(&clock, 8);
    run(&[&original], &clock, &requests(0x9e37_79b9_7f4a_7c15, 3_000));
    original.sweep();
    let restored = store_on(&clock, 64);
    let report = restored.restore(&original.snapshot(), &limits()).unwrap();
    assert_eq!((report.restored, report.skipped_limits, report.evicted), (original.len(), 0, 0));
    assert_eq!(report.taken_at, clock.now());
    assert!(report.restored > 50, "the trace leaves many states: {report:?}");
    // From here on, both stores see the same requests and must give identical verdicts.
    let verdicts = run(&[&original, &restored], &clock, &requests(0x2545_f491_4f6c_dd1d, 3_000));
    for (index, (a, b)) in verdicts[0].iter().zip(&verdicts[1]).enumerate() {
        assert_eq!(a, b, "request {index} after the restore");
    }
    assert_eq!(restored.snapshot(), restored.snapshot(), "taking a snapshot changes nothing");
}

#[test]
fn a_snapshot_written_shard_by_shard_is_the_same_bytes() {
    let clock = ManualClock::default();
    let store = store_on(&clock, 16);
    run(&[&store], &clock, &requests(7, 500));
    let mut written = Vec::new();
    store.write_snapshot(&mut written).unwrap();
    assert_eq!(written, store.snapshot());
}

fn drained(limit: &Limit, clock: &ManualClock) -> MemoryStore {
    let store = store_on(clock, 4);
    let key = Key::new(b"k").unwrap();
    store.check_now(key, std::slice::from_ref(limit), clock.now(), limit.policy().limit()).unwrap();
    store
}

#[test]
fn a_changed_limit_starts_fresh() {
    let clock = ManualClock::default();
    let bucket = TokenBucketSettings { capacity: 3, refill_amount: 1, refill_interval: Duration::from_secs(60) };
    let api = Limit::new("api", TokenBucket::new(bucket).unwrap());
    let snapshot = drained(&api, &clock).snapshot();
    let bucket = TokenBucketSettings { capacity: 4, refill_amount: 1, refill_interval: Duration::from_secs(60) };
    let changed = Limit::new("api", TokenBucket::new(bucket).unwrap());
    let bucket = TokenBucketSettings { capacity: 3, refill_amount: 1, refill_interval: Duration::from_secs(60) };
    let renamed = Limit::new("api-v2", TokenBucket::new(bucket).unwrap());
    let restored = store_on(&clock, 4);
    let report = restored.restore(&snapshot, &[changed.clone(), renamed]).unwrap();
    assert_eq!((report.restored, report.skipped_limits, report.skipped_states), (0, 1, 1));
    assert!(restored.is_empty());
    let fresh = restored.check_now(Key::new(b"k").unwrap(), &[changed], clock.now(), 0).unwrap();
    assert_eq!(fresh.decision.remaining, 4);
    let same = restored.restore(&snapshot, std::slice::from_ref(&api)).unwrap();
    assert_eq!((same.restored, same.skipped_limits), (1, 0));
    assert_eq!(restored.check_now(Key::new(b"k").unwrap(), &[api], clock.now(), 0).unwrap().decision.remaining, 0);
}

#[test]
fn states_fresh_by_the_store_clock_are_neither_saved_nor_restored() {
    let clock = ManualClock::default();
    let log = Limit::new("log", SlidingLog::new(2, ms(10), SlidingLogVariant::Accepted).unwrap());
    let store = store_on(&clock, 4);
    let one = std::slice::from_ref(&log);
    store.check_now(Key::new(b"old").unwrap(), one, Timestamp::from_micros(1_000), 1).unwrap();
    clock.set(Timestamp::from_micros(20_000));
    store.check_now(Key::new(b"new").unwrap(), one, clock.now(), 1).unwrap();
    assert_eq!(store.len(), 2, "no sweep has run yet");
    let snapshot = store.snapshot();
    let report = store_on(&clock, 4).restore(&snapshot, one).unwrap();
    assert_eq!((report.restored, report.fresh), (1, 0), "the expired log was not saved");
    // A store whose clock is already past the log's window restores nothing.
    let later = ManualClock::default();
    later.set(Timestamp::from_micros(30_000));
    let report = store_on(&later, 4).restore(&snapshot, one).unwrap();
    assert_eq!((report.restored, report.fresh), (0, 1));
}

#[test]
fn a_key_the_store_already_holds_keeps_its_live_state() {
    let clock = ManualClock::default();
    let bucket = TokenBucketSettings { capacity: 3, refill_amount: 1, refill_interval: Duration::from_secs(60) };
    let api = Limit::new("api", TokenBucket::new(bucket).unwrap());
    let snapshot = drained(&api, &clock).snapshot();
    let store = store_on(&clock, 4);
    let key = Key::new(b"k").unwrap();
    store.check_now(key, std::slice::from_ref(&api), clock.now(), 1).unwrap();
    let report = store.restore(&snapshot, std::slice::from_ref(&api)).unwrap();
    assert_eq!((report.restored, report.present), (0, 1));
    assert_eq!(store.check_now(key, &[api], clock.now(), 0).unwrap().decision.remaining, 2);
}

#[test]
fn restore_keeps_within_max_keys_and_keeps_the_longest_lived_states() {
    let clock = ManualClock::default();
    let bucket = TokenBucketSettings { capacity: 10, refill_amount: 1, refill_interval: Duration::from_secs(1) };
    let bucket = Limit::new("bucket", TokenBucket::new(bucket).unwrap());
    let source = store_on(&clock, 16);
    for i in 0..1_000u64 {
        // Key i takes 1 to 10 tokens: the more it took, the longer its state lives.
        let key = format!("key-{i}");
        source
            .check_now(Key::new(key.as_bytes()).unwrap(), std::slice::from_ref(&bucket), clock.now(), i % 10 + 1)
            .unwrap();
    }
    let small = MemoryStore::builder().clock(clock.clone()).shards(1).max_keys(100).build();
    let report = small.restore(&source.snapshot(), std::slice::from_ref(&bucket)).unwrap();
    assert!(small.len() <= 100, "{} states", small.len());
    assert_eq!(report.restored - report.evicted, small.len());
    let drained = (0..1_000u64)
        .filter(|i| i % 10 == 9)
        .filter(|i| {
            let key = format!("key-{i}");
            let verdict =
                small.check_now(Key::new(key.as_bytes()).unwrap(), std::slice::from_ref(&bucket), clock.now(), 0);
            verdict.unwrap().decision.remaining == 0
        })
        .count();
    assert!(drained >= 80, "only {drained} of the 100 longest-lived states were kept");
}

// ---- Refusals. A snapshot is forged here from the layout documented in the core. ----

const MAGIC: &[u8; 8] = b"SLUICEMS";

/// A snapshot (format version 2) around `tables`, with its end tag and a valid checksum.
fn forge(tables: &[u8]) -> Vec<u8> {
    forge_version(2, tables)
}

/// A snapshot of format `version` holding `tables`, taken at 5 µs.
fn forge_version(version: u16, tables: &[u8]) -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&version.to_le_bytes());
    bytes.extend_from_slice(&5u64.to_le_bytes());
    bytes.extend_from_slice(tables);
    bytes.push(0);
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

/// A table of `id` (tag `tag`) holding `entries` of (key, encoded state).
fn table(tag: u8, id: LimitId, entries: &[(&[u8], Vec<u8>)]) -> Vec<u8> {
    let mut bytes = vec![tag];
    bytes.extend_from_slice(&id.0.to_le_bytes());
    bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (key, state) in entries {
        bytes.extend_from_slice(&(key.len() as u16).to_le_bytes());
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(state);
    }
    bytes
}

/// A sliding log state holding `entries`.
fn log_state(entries: &[u64]) -> Vec<u8> {
    let mut bytes = (entries.len() as u32).to_le_bytes().to_vec();
    entries.iter().for_each(|entry| bytes.extend_from_slice(&entry.to_le_bytes()));
    bytes
}

fn u64s(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|value| value.to_le_bytes()).collect()
}

fn refusal(bytes: &[u8], limits: &[Limit]) -> SnapshotError {
    let store = store_on(&ManualClock::default(), 4);
    let error = store.restore(bytes, limits).unwrap_err();
    assert!(store.is_empty(), "a refused snapshot inserted states: {error}");
    error
}

#[test]
fn the_envelope_is_checked_first() {
    let limits = limits();
    assert_eq!(refusal(b"{\"not\": \"a snapshot\"}", &limits), SnapshotError::NotASnapshot);
    assert_eq!(refusal(b"{\"not\": \"a snapshot\"}", &limits).to_string(), "not a Sluice snapshot");
    assert_eq!(refusal(b"", &limits), SnapshotError::Truncated { offset: 0 });
    assert_eq!(refusal(b"SLUICE", &limits), SnapshotError::Truncated { offset: 6 });
    let future = forge_version(6, &[]);
    let error = refusal(&future, &limits);
    assert_eq!(error, SnapshotError::UnsupportedVersion { found: 6 });
    assert!(error.to_string().contains("version 6"), "{error}");
    let mut corrupted = forge(&[]);
    corrupted[12] ^= 1;
    assert_eq!(refusal(&corrupted, &limits), SnapshotError::Checksum);
    let whole = forge(&[]);
    assert_eq!(refusal(&whole[..whole.len() - 1], &limits), SnapshotError::Checksum);
}

/// A version-3 table's definition is read without trusting it: its text must be UTF-8, a
/// length past the end is a truncated snapshot (nothing allocated), and a limit with a
/// long name (a long definition) is restored like any other.
#[test]
fn a_version_3_definition_is_checked() {
    let limits = limits();
    let table_with = |length: u32, definition: &[u8]| {
        let mut bytes = vec![1];
        bytes.extend_from_slice(&limits[0].id().0.to_le_bytes());
        bytes.extend_from_slice(&length.to_le_bytes());
        bytes.extend_from_slice(definition);
        bytes.extend_from_slice(&0u64.to_le_bytes());
        bytes
    };
    let definition = limits[0].definition();
    let good = forge_version(3, &table_with(definition.len() as u32, definition.as_bytes()));
    assert!(MemoryStore::new().restore(&good, &limits).is_ok());
    let huge = forge_version(3, &table_with(u32::MAX, b""));
    assert!(matches!(refusal(&huge, &limits), SnapshotError::Truncated { .. }));
    let not_text = forge_version(3, &table_with(2, &[0xff, 0xfe]));
    assert!(
        matches!(refusal(&not_text, &limits), SnapshotError::Invalid { problem, .. } if problem.contains("not UTF-8"))
    );
    let early = forge_version(3, &table_with(60_000, b"sluice"));
    assert!(matches!(refusal(&early, &limits), SnapshotError::Truncated { .. }));
    let long_name = [Limit::new("n".repeat(100_000), SlidingLog::new(3, ms(10), SlidingLogVariant::Accepted).unwrap())];
    let store = MemoryStore::builder().clock(ManualClock::default()).build();
    store.check_now(Key::new(b"k").unwrap(), &long_name, Timestamp::from_micros(1), 1).unwrap();
    let restored = MemoryStore::builder().clock(ManualClock::default()).build();
    assert_eq!(restored.restore(&store.snapshot(), &long_name).unwrap().restored, 1);
}

/// The message of the refusal of `tables`, checked to be an `Invalid`.
fn invalid(tables: &[u8], limits: &[Limit]) -> String {
    match refusal(&forge(tables), limits) {
        error @ SnapshotError::Invalid { .. } => error.to_string(),
        other => panic!("expected an invalid snapshot, got {other:?}"),
    }
}

#[test]
fn impossible_states_are_refused_and_nothing_is_inserted() {
    let log = Limit::new("log", SlidingLog::new(3, ms(10), SlidingLogVariant::Accepted).unwrap());
    let window = Limit::new("window", SlidingWindow::new(4, ms(10), 5).unwrap());
    let bucket = TokenBucketSettings { capacity: 3, refill_amount: 1, refill_interval: ms(10) };
    let bucket = Limit::new("bucket", TokenBucket::new(bucket).unwrap());
    let limits = [log.clone(), window.clone(), bucket.clone()];
    let good = (&b"good"[..], log_state(&[1, 2]));
    let message = invalid(&table(1, log.id(), &[good.clone(), (b"bad", log_state(&[1, 2, 3, 4]))]), &limits);
    assert!(message.contains("limit \"log\"") && message.contains("key \"bad\""), "{message}");
    assert!(message.contains("more than the limit of 3"), "{message}");
    assert!(
        invalid(&table(1, log.id(), &[good.clone(), (b"k", log_state(&[5, 4]))]), &limits).contains("not in order")
    );
    // Unsorted timestamps are refused even in a table of a limit not restored.
    assert!(invalid(&table(1, LimitId(7), &[(b"k", log_state(&[5, 4]))]), &limits).contains("not in order"));
    assert!(invalid(&table(1, log.id(), &[(b"", log_state(&[1]))]), &limits).contains("a key of 0 bytes"));
    let long_key = vec![b'k'; Key::MAX_LEN + 1];
    assert!(invalid(&table(1, log.id(), &[(&long_key, log_state(&[1]))]), &limits).contains("1025 bytes"));
    assert!(invalid(&table(9, log.id(), std::slice::from_ref(&good)), &limits).contains("unknown algorithm tag 9"));
    let three_slots = [&u64s(&[10])[..], &3u32.to_le_bytes(), &u64s(&[1, 1, 1])].concat();
    assert!(invalid(&table(3, window.id(), &[(b"k", three_slots)]), &limits).contains("3 counters for 5 buckets"));
    assert!(invalid(&table(4, bucket.id(), &[(b"k", u64s(&[4, 0]))]), &limits).contains("more than the limit of 3"));
    let mut trailing = table(1, log.id(), &[good]);
    trailing.extend_from_slice(&[0, 1]);
    assert!(invalid(&trailing, &limits).contains("after the end of the tables"));
}

/// Each counter of a restored sliding window is checked against the limit, not their sum:
/// counters whose sum overflows `u64` still decide (a rejection), without a panic.
#[test]
fn sliding_window_counters_whose_sum_overflows_are_rejected_without_panicking() {
    let most = 1u64 << 52;
    let window = Limit::new("window", SlidingWindow::new(most, Duration::from_micros(10_000), 10_000).unwrap());
    let state = [&u64s(&[20_000])[..], &10_001u32.to_le_bytes(), &u64s(&vec![most; 10_001])].concat();
    let store = MemoryStore::builder().clock(ManualClock::default()).build();
    let report = store.restore(&forge(&table(3, window.id(), &[(b"k", state)])), std::slice::from_ref(&window));
    assert_eq!(report.unwrap().restored, 1);
    let at = Timestamp::from_micros(20_000);
    let verdict = store.check_now(Key::new(b"k").unwrap(), &[window], at, 1).unwrap();
    assert!(!verdict.decision.allowed);
}

/// A sliding window's newest bucket is a time divided by the bucket width: one past what
/// any time gives is refused (it would make the key's decisions underflow).
#[test]
fn a_sliding_window_bucket_past_the_end_of_time_is_refused() {
    let window = Limit::new("window", SlidingWindow::new(4, Duration::from_micros(10), 5).unwrap());
    let beyond = [&u64s(&[u64::MAX / 2 + 1])[..], &6u32.to_le_bytes(), &u64s(&[1, 0, 0, 0, 0, 0])].concat();
    let message = invalid(&table(3, window.id(), &[(b"k", beyond)]), std::slice::from_ref(&window));
    assert!(message.contains("past the end of time for a width of 2 µs"), "{message}");
    let last = [&u64s(&[u64::MAX / 2])[..], &6u32.to_le_bytes(), &u64s(&[1, 0, 0, 0, 0, 0])].concat();
    let store = MemoryStore::builder().clock(ManualClock::default()).build();
    let report = store.restore(&forge(&table(3, window.id(), &[(b"k", last)])), std::slice::from_ref(&window));
    assert_eq!(report.unwrap().restored, 1);
    let verdict = store.check_now(Key::new(b"k").unwrap(), &[window], Timestamp::from_micros(u64::MAX), 1).unwrap();
    assert_eq!(verdict.decision.limit, 4, "decided without a panic");
}

#[test]
fn a_forged_length_is_refused_without_allocating_it() {
    let log = Limit::new("log", SlidingLog::new(SlidingLog::MAX_LIMIT, ms(10), SlidingLogVariant::Accepted).unwrap());
    let huge = u32::MAX.to_le_bytes().to_vec();
    let error = refusal(&forge(&table(1, log.id(), &[(b"k", huge)])), &[log]);
    assert!(matches!(error, SnapshotError::Truncated { .. }), "{error:?}");
}

/// A valid snapshot of a store that saw traffic on every algorithm.
fn valid_snapshot() -> Vec<u8> {
    let clock = ManualClock::default();
    let store = store_on(&clock, 4);
    run(&[&store], &clock, &requests(11, 200));
    store.snapshot()
}

proptest! {
    #[test]
    fn arbitrary_bytes_are_refused(bytes in prop::collection::vec(any::<u8>(), 0..300), magic in any::<bool>()) {
        let bytes = if magic { [&MAGIC[..], &1u16.to_le_bytes(), &bytes].concat() } else { bytes };
        prop_assert!(store_on(&ManualClock::default(), 2).restore(&bytes, &limits()).is_err());
    }

    #[test]
    fn corrupted_or_truncated_snapshots_are_refused(at in any::<prop::sample::Index>(), flip in 1..=255u8, cut in any::<bool>()) {
        let mut bytes = valid_snapshot();
        let at = at.index(bytes.len());
        if cut {
            bytes.truncate(at);
        } else {
            bytes[at] ^= flip;
        }
        let store = store_on(&ManualClock::default(), 2);
        prop_assert!(store.restore(&bytes, &limits()).is_err());
        prop_assert!(store.is_empty());
    }

    #[test]
    fn any_tables_with_a_valid_checksum_are_restored_whole_or_not_at_all(
        tables in prop::collection::vec((0..7u8, any::<prop::sample::Index>(), 0..4u64, prop::collection::vec(any::<u8>(), 0..80)), 0..4),
    ) {
        let limits = limits();
        let mut body = Vec::new();
        for (tag, limit, count, rest) in tables {
            body.push(tag);
            body.extend_from_slice(&limits[limit.index(limits.len())].id().0.to_le_bytes());
            body.extend_from_slice(&count.to_le_bytes());
            body.extend_from_slice(&rest);
        }
        let store = store_on(&ManualClock::default(), 2);
        match store.restore(&forge(&body), &limits) {
            Ok(report) => prop_assert_eq!(store.len(), report.restored - report.evicted),
            Err(_) => prop_assert!(store.is_empty()),
        }
    }
}

/// A sliding window state written in format version 3 (no anchor: every grid was
/// clock-aligned) is restored on the aligned grid and decides as the store that wrote it.
#[test]
fn a_version_3_sliding_window_state_is_read_without_an_anchor() {
    let limit = Limit::new("window", SlidingWindow::new(4, ms(10), 1).unwrap());
    let definition = limit.definition();
    let mut tables = vec![3];
    tables.extend_from_slice(&limit.id().0.to_le_bytes());
    tables.extend_from_slice(&(definition.len() as u32).to_le_bytes());
    tables.extend_from_slice(definition.as_bytes());
    tables.extend_from_slice(&1u64.to_le_bytes());
    tables.extend_from_slice(&1u16.to_le_bytes());
    tables.extend_from_slice(b"k");
    // Newest bucket 100 (1 s / 10 ms), two slots: 3 counted in bucket 100 (slot 0).
    tables.extend_from_slice(&u64s(&[100]));
    tables.extend_from_slice(&2u32.to_le_bytes());
    tables.extend_from_slice(&u64s(&[3, 0]));
    let clock = ManualClock::at(Timestamp::from_micros(1_000_000));
    let restored = MemoryStore::builder().clock(clock.clone()).build();
    let limits = [limit];
    assert_eq!(restored.restore(&forge_version(3, &tables), &limits).unwrap().restored, 1);
    let live = MemoryStore::builder().clock(clock).build();
    let key = Key::new(b"k").unwrap();
    live.check_now(key, &limits, Timestamp::from_micros(1_000_000), 3).unwrap();
    for at in [1_004_000, 1_009_999, 1_013_000, 1_019_000, 1_030_000] {
        let now = Timestamp::from_micros(at);
        let (want, have) = (live.check_now(key, &limits, now, 1).unwrap(), restored.check_now(key, &limits, now, 1));
        assert_eq!(have.unwrap(), want, "at {at} µs");
    }
}

/// A version-5 state's leases are read without trusting them: more than a state can hold,
/// an empty lease or leases out of order are refused, and well-formed ones are restored.
#[test]
fn version_5_leases_are_checked() {
    let bucket = Limit::new(
        "bucket",
        TokenBucket::new(TokenBucketSettings { capacity: 10, refill_amount: 1, refill_interval: ms(1) }).unwrap(),
    );
    let limits = [bucket.clone()];
    let state = |holds: &[(u64, u64)], count: u8, ended: u8| {
        let pairs: Vec<u64> = holds.iter().flat_map(|&(deadline, units)| [deadline, units]).collect();
        [&u64s(&[3, 1])[..], &[count, ended], &u64s(&pairs)].concat()
    };
    let at = |version, state: Vec<u8>| {
        let definition = bucket.definition();
        let mut table = vec![4];
        table.extend_from_slice(&bucket.id().0.to_le_bytes());
        table.extend_from_slice(&(definition.len() as u32).to_le_bytes());
        table.extend_from_slice(definition.as_bytes());
        table.extend_from_slice(&1u64.to_le_bytes());
        table.extend_from_slice(&1u16.to_le_bytes());
        table.push(b'k');
        table.extend_from_slice(&state);
        forge_version(version, &table)
    };
    let invalid = |bytes: Vec<u8>| refusal(&bytes, &limits).to_string();
    assert!(invalid(at(5, state(&[], 17, 0))).contains("17 leases held"));
    assert!(invalid(at(5, state(&[], 0, 2))).contains("ended mark 2"));
    assert!(invalid(at(5, state(&[(9, 1), (8, 1)], 2, 0))).contains("out of order"));
    assert!(invalid(at(5, state(&[(9, 0)], 1, 0))).contains("empty"));
    let clock = ManualClock::at(Timestamp::from_micros(5));
    let store = store_on(&clock, 4);
    let report = store.restore(&at(5, state(&[(9, 2)], 1, 0)), &limits).unwrap();
    assert_eq!(report.restored, 1);
    // 3 taken (2 of them held until 9 µs), so 7 remain.
    let peek = store.check_now(Key::new(b"k").unwrap(), &limits, clock.now(), 0).unwrap();
    assert_eq!(peek.decision.remaining, 7);
}
