//! The memory store keeps keys of up to 15 bytes, of exactly 16 bytes and longer keys in
//! separate tables: every key must still have its own state, whatever its length, and
//! reset and snapshots must find every key again.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use proptest::prelude::*;
use sluice_core::{FixedWindow, Key, Limit, ManualClock, MemoryStore, Timestamp};
use std::collections::HashMap;
use std::time::Duration;

const NOW: Timestamp = Timestamp::from_micros(1_700_000_000_000_000);
const LIMIT: u64 = 3;

fn limit() -> Limit {
    let policy =
        FixedWindow::new(LIMIT, Duration::from_secs(60), sluice_core::Alignment::Aligned, Duration::ZERO).unwrap();
    Limit::new("per_key", policy)
}

fn new_store() -> MemoryStore {
    MemoryStore::builder().clock(ManualClock::at(NOW)).build()
}

fn check(store: &MemoryStore, limit: &Limit, key: &[u8]) -> bool {
    let verdict = store.check_now(Key::new(key).unwrap(), std::slice::from_ref(limit), NOW, 1).unwrap();
    verdict.decision.allowed
}

/// Keys from a tiny alphabet with lengths around the class boundaries (15, 16, 17), so
/// that keys differing only by trailing zeros or by length are common.
fn keys() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![0u8, 1, 0x80, 0xff]), 1..=20)
}

proptest! {
    #[test]
    fn every_key_has_its_own_state(trace in prop::collection::vec(keys(), 1..200)) {
        let (store, limit) = (new_store(), limit());
        let mut used: HashMap<Vec<u8>, u64> = HashMap::new();
        for key in &trace {
            let count = used.entry(key.clone()).or_default();
            let expected = *count < LIMIT;
            *count += u64::from(expected);
            prop_assert_eq!(check(&store, &limit, key), expected, "key {:?}", key);
        }
        prop_assert_eq!(store.len(), used.len());
    }

    #[test]
    fn reset_and_snapshots_find_every_key(trace in prop::collection::vec(keys(), 1..100)) {
        let (store, limit) = (new_store(), limit());
        for key in &trace {
            check(&store, &limit, key);
        }
        let restored = new_store();
        restored.restore(&store.snapshot(), std::slice::from_ref(&limit)).unwrap();
        prop_assert_eq!(restored.len(), store.len());
        for key in &trace {
            prop_assert_eq!(check(&restored, &limit, key), check(&store, &limit, key), "key {:?}", key);
        }
        let first = &trace[0];
        prop_assert_eq!(restored.reset_now(Key::new(first).unwrap(), std::slice::from_ref(&limit)), 1);
        prop_assert!(check(&restored, &limit, first), "a reset key starts fresh");
    }
}
