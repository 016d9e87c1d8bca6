//! Limit identities are stable: pinned values for every algorithm, a definition that names
//! every parameter, and snapshots of the first identity scheme restored by matching.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use sluice_core::{
    Alignment, Clock, FixedWindow, Key, LeakMode, LeakyBucket, Limit, ManualClock, MemoryStore, Policy, SlidingLog,
    SlidingLogVariant, Timestamp, TokenBucket, TokenBucketSettings,
};
use std::time::Duration;
use support::{ms, policies};

/// The first nine policies of `support::policies` (those the fixture snapshots were written
/// with), named `limit-0` to `limit-8`.
fn limits() -> Vec<Limit> {
    every_limit().into_iter().take(9).collect()
}

/// Every policy of `support::policies`, named `limit-0`, `limit-1`, …
fn every_limit() -> Vec<Limit> {
    policies().into_iter().enumerate().map(|(index, policy)| Limit::new(format!("limit-{index}"), policy)).collect()
}

/// Identities as the `sluice.limit.v2` scheme gives them. A change here orphans every Redis
/// key and snapshot table of every user: it needs a new scheme and a note in docs/redis.md.
#[test]
fn identities_are_pinned() {
    let pinned = [
        "3c76a35186644610",
        "9bf9e7ec0b22ecc2",
        "74fe4a192e7e34ae",
        "449a330d6050e2ed",
        "b97e8755e610b83d",
        "f1f73a06a58d441a",
        "dc7926c7df83e048",
        "23822fa49ec21ad9",
        "a7ca01d2270eb4b7",
        "a35391168e13c55e",
        "24f40e201023b60b",
        "4d318749584fa2ce",
    ];
    let ids: Vec<String> = every_limit().iter().map(|limit| limit.id().to_string()).collect();
    assert_eq!(ids, pinned);
}

/// The identity is FNV-1a of the definition, as docs/redis.md describes it: recomputed
/// here from the text alone.
#[test]
fn identity_is_the_hash_of_the_definition() {
    for limit in limits() {
        let hash = limit
            .definition()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3));
        assert_eq!(format!("{hash:016x}"), limit.id().to_string(), "{}", limit.definition());
    }
}

/// Every parameter is part of the identity: changing any one of them gives another.
#[test]
fn every_parameter_changes_the_identity() {
    let variants: Vec<Policy> = vec![
        FixedWindow::new(3, ms(10), Alignment::Aligned, ms(4)).unwrap().into(),
        FixedWindow::new(4, ms(10), Alignment::Aligned, ms(4)).unwrap().into(),
        FixedWindow::new(3, ms(11), Alignment::Aligned, ms(4)).unwrap().into(),
        FixedWindow::new(3, ms(10), Alignment::Aligned, ms(5)).unwrap().into(),
        FixedWindow::new(3, ms(10), Alignment::Anchored, Duration::ZERO).unwrap().into(),
        FixedWindow::new(3, ms(10), Alignment::Aligned, Duration::ZERO).unwrap().into(),
        SlidingLog::new(3, ms(10), SlidingLogVariant::Accepted).unwrap().into(),
        SlidingLog::new(3, ms(10), SlidingLogVariant::Attempts).unwrap().into(),
        TokenBucket::new(TokenBucketSettings { capacity: 3, refill_amount: 1, refill_interval: ms(10) })
            .unwrap()
            .into(),
        TokenBucket::new(TokenBucketSettings { capacity: 3, refill_amount: 2, refill_interval: ms(10) })
            .unwrap()
            .into(),
        LeakyBucket::new(ms(10), 2, LeakMode::NoDelay).unwrap().into(),
        LeakyBucket::new(ms(10), 2, LeakMode::Delay).unwrap().into(),
        LeakyBucket::new(ms(10), 3, LeakMode::Delay).unwrap().into(),
    ];
    let mut ids: Vec<_> = variants.into_iter().map(|policy| Limit::new("same", policy).id()).collect();
    ids.push(Limit::new("other", SlidingLog::new(3, ms(10), SlidingLogVariant::Accepted).unwrap()).id());
    let count = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), count, "two definitions share an identity");
}

/// A name that holds a line of the encoding cannot pass for another definition.
#[test]
fn names_cannot_forge_a_definition() {
    let bucket = TokenBucketSettings { capacity: 3, refill_amount: 2, refill_interval: ms(4) };
    let policy = || TokenBucket::new(bucket).unwrap();
    let plain = Limit::new("a", policy());
    let forged = Limit::new("a\nalgorithm=token_bucket", policy());
    assert_ne!(plain.definition(), forged.definition());
    assert_ne!(plain.id(), forged.id());
}

/// `tests/fixtures/snapshot-v1.bin` was written by the release before the identity scheme
/// changed (format version 1, ids hashed from `Debug` text): keys `alice` and `bob` each
/// checked once against all nine limits at 1 700 000 000 s. Restoring it keeps every state.
#[test]
fn version_1_snapshots_are_restored_by_their_old_identities() {
    let start = Timestamp::from_micros(1_700_000_000_000_000);
    let clock = ManualClock::at(start);
    let restored = MemoryStore::builder().clock(clock.clone()).build();
    let report = restored.restore(include_bytes!("fixtures/snapshot-v1.bin"), &limits()).unwrap();
    assert_eq!((report.restored, report.skipped_limits, report.skipped_states), (18, 0, 0));
    decides_like_the_store_that_made_two_checks(&restored, &clock);
}

/// `tests/fixtures/snapshot-v2.bin` was written by the release before tables carried their
/// limit's definition (format version 2), after the same checks as the version-1 file.
#[test]
fn version_2_snapshots_are_restored() {
    let clock = ManualClock::at(Timestamp::from_micros(1_700_000_000_000_000));
    let restored = MemoryStore::builder().clock(clock.clone()).build();
    let report = restored.restore(include_bytes!("fixtures/snapshot-v2.bin"), &limits()).unwrap();
    assert_eq!((report.restored, report.skipped_limits, report.skipped_states), (18, 0, 0));
    decides_like_the_store_that_made_two_checks(&restored, &clock);
    // Without definitions, nothing can be adopted.
    let adopting = MemoryStore::builder().clock(clock.clone()).build();
    let report = adopting.restore_adopting(include_bytes!("fixtures/snapshot-v2.bin"), &[], |_| true).unwrap();
    assert_eq!((report.restored, report.skipped_limits, report.skipped_states), (0, 9, 18));
}

/// `restored` (holding the states of `alice` and `bob` after one check each of every limit
/// at the clock's start) decides every later check as a store that made those checks.
fn decides_like_the_store_that_made_two_checks(restored: &MemoryStore, clock: &ManualClock) {
    let start = clock.now();
    let live = MemoryStore::builder().clock(clock.clone()).build();
    for key in ["alice", "bob"] {
        live.check_now(Key::new(key.as_bytes()).unwrap(), &limits(), start, 1).unwrap();
    }
    decide_alike(&live, restored, clock, &limits());
}

/// `got` decides as `expected` every check of `alice`, `bob` and `carol` against each of
/// `limits` alone, 700 µs apart on `clock`, for 40 steps.
fn decide_alike(expected: &MemoryStore, got: &MemoryStore, clock: &ManualClock, limits: &[Limit]) {
    for step in 0..40 {
        clock.advance(Duration::from_micros(700));
        for key in ["alice", "bob", "carol"] {
            let key = Key::new(key.as_bytes()).unwrap();
            for limit in limits {
                let one = std::slice::from_ref(limit);
                let (want, have) =
                    (expected.check_now(key, one, clock.now(), 1), got.check_now(key, one, clock.now(), 1));
                assert_eq!(have.unwrap(), want.unwrap(), "step {step}, {}", limit.name());
            }
        }
    }
}

/// A version-1 table whose limit is not among those given (renamed, or changed) is skipped
/// and counted, never read as the state of another limit.
#[test]
fn version_1_tables_of_unknown_limits_are_skipped() {
    let clock = ManualClock::at(Timestamp::from_micros(1_700_000_000_000_000));
    let renamed: Vec<Limit> = policies()
        .into_iter()
        .enumerate()
        .map(|(index, policy)| Limit::new(format!("renamed-{index}"), policy))
        .collect();
    let store = MemoryStore::builder().clock(clock).build();
    let report = store.restore(include_bytes!("fixtures/snapshot-v1.bin"), &renamed).unwrap();
    assert_eq!((report.restored, report.skipped_limits, report.skipped_states), (0, 9, 18));
}

/// `tests/fixtures/snapshot-v4.bin` was written by the release before states carried the
/// leases they hold (`alice` and `bob` checked once under each limit at its clock): every
/// state reads back, holding no lease, and decides as the store that wrote it would.
#[test]
fn version_4_snapshots_still_read() {
    let clock = ManualClock::at(Timestamp::from_micros(1_700_000_000_000_000));
    let restored = MemoryStore::builder().clock(clock.clone()).build();
    let report = restored.restore(include_bytes!("fixtures/snapshot-v4.bin"), &limits()).unwrap();
    let written = MemoryStore::builder().clock(clock.clone()).build();
    for key in [&b"alice"[..], b"bob"] {
        written.check_now(Key::new(key).unwrap(), &limits(), clock.now(), 1).unwrap();
    }
    assert_eq!(report.restored, written.len());
    let later = clock.now().saturating_add(std::time::Duration::from_millis(1));
    for key in [&b"alice"[..], b"bob", b"carol"] {
        let key = Key::new(key).unwrap();
        for limit in limits() {
            let limits = [limit];
            assert_eq!(
                restored.check_now(key, &limits, later, 1).unwrap(),
                written.check_now(key, &limits, later, 1).unwrap()
            );
        }
    }
}

/// Snapshots written now carry the new identities, their limits' definitions, the leases
/// states hold, and format version 5.
#[test]
fn new_snapshots_are_version_5() {
    let clock = ManualClock::at(Timestamp::from_micros(1_700_000_000_000_000));
    let store = MemoryStore::builder().clock(clock.clone()).build();
    store.check_now(Key::new(b"alice").unwrap(), &limits(), clock.now(), 1).unwrap();
    let snapshot = store.snapshot();
    assert_eq!(&snapshot[8..10], &5u16.to_le_bytes());
    let report = MemoryStore::builder().clock(clock).build().restore(&snapshot, &limits()).unwrap();
    assert_eq!(report.restored, 9);
}

/// The states of limits made at run time (no configuration lists them) are restored when
/// the caller adopts them, and decide as before the restart; the others are skipped.
#[test]
fn limits_made_at_run_time_are_restored_when_adopted() {
    let clock = ManualClock::at(Timestamp::from_micros(1_700_000_000_000_000));
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let run_time: Vec<Limit> = policies()
        .into_iter()
        .enumerate()
        .map(|(index, policy)| Limit::new(format!("override-{index}"), policy))
        .collect();
    for key in ["alice", "bob"] {
        store.check_now(Key::new(key.as_bytes()).unwrap(), &run_time, clock.now(), 1).unwrap();
    }
    let snapshot = store.snapshot();

    let even = |limit: &Limit| limit.name().ends_with(['0', '2', '4', '6', '8']);
    let restored = MemoryStore::builder().clock(clock.clone()).build();
    let report = restored.restore_adopting(&snapshot, &[], even).unwrap();
    assert_eq!((report.restored, report.skipped_limits, report.skipped_states), (12, 6, 12));
    let adopted: Vec<Limit> = run_time.into_iter().filter(even).collect();
    decide_alike(&store, &restored, &clock, &adopted);
}

/// A definition that does not hash to its table's id (a forged or damaged one) adopts
/// nothing: the table is skipped, never read as the definition's limit.
#[test]
fn a_definition_that_does_not_match_its_id_is_not_adopted() {
    let clock = ManualClock::at(Timestamp::from_micros(1_700_000_000_000_000));
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let limit = Limit::new("override", policies().remove(0));
    store.check_now(Key::new(b"alice").unwrap(), std::slice::from_ref(&limit), clock.now(), 1).unwrap();
    let mut snapshot = store.snapshot();
    let other = Limit::new("overridf", policies().remove(0));
    let at = snapshot.windows(8).position(|window| window == b"override").expect("the definition");
    snapshot[at..at + 8].copy_from_slice(b"overridf");
    let body = snapshot.len() - 4;
    let checksum = crc32fast::hash(&snapshot[..body]).to_le_bytes();
    snapshot[body..].copy_from_slice(&checksum);
    let restored = MemoryStore::builder().clock(clock).build();
    let report = restored.restore_adopting(&snapshot, &[], |_| true).unwrap();
    assert_eq!((report.restored, report.skipped_limits), (0, 1));
    assert!(Limit::from_definition(&other.definition()).is_ok(), "the forged text is a valid definition");
}
