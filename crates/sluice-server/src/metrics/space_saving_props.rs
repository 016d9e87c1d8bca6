//! Property tests of the top-keys tables against an exact count, on the streams that make
//! a heavy-hitter summary fail if it can: Zipf-distributed keys with random weights, a key
//! that appears just above `n / k` times among a flood of one-off keys, and bursts of keys
//! on both sides of an epoch's turn (epochs driven by a [`ManualClock`]).
//!
//! For each epoch's table, with `n` its total and `k` its counters, every run asserts:
//! every key whose true count is above `n / k` is listed; every listed key has
//! `count − error ≤ true ≤ count` and `error ≤ n / k`; the counts add up to `n`.

use crate::metrics::space_saving::{SpaceSaving, key_hash};
use crate::metrics::top_keys::{By, EPOCH_MICROS, EpochTop, TopKeys};
use proptest::collection::vec;
use proptest::prelude::*;
use sluice_core::{Clock, ManualClock, Timestamp};
use std::collections::HashMap;
use std::time::Duration;

/// Keys `0..universe` by a Zipf law of exponent `s`, one for each uniform draw in `0..1`
/// (the inverse of the CDF).
fn zipf(draws: &[f64], universe: usize, s: f64) -> Vec<usize> {
    let mut cdf: Vec<f64> = (1..=universe).map(|rank| (rank as f64).powf(-s)).collect();
    let mut total = 0.0;
    for weight in &mut cdf {
        total += *weight;
        *weight = total;
    }
    draws.iter().map(|&draw| cdf.partition_point(|&edge| edge < draw * total).min(universe - 1)).collect()
}

/// Asserts the table's guarantee for `truth`, the exact weights of the table's stream.
fn assert_bound(top: &EpochTop, k: usize, truth: &HashMap<Vec<u8>, u64>) {
    let n: u64 = truth.values().sum();
    assert_eq!(top.total, n, "the table's total is the stream's");
    assert_eq!(top.bound, n / k as u64);
    let listed: HashMap<&[u8], (u64, u64)> =
        top.keys.iter().map(|entry| (entry.key.as_slice(), (entry.count, entry.error))).collect();
    for (key, &weight) in truth.iter().filter(|&(_, &weight)| weight > top.bound) {
        assert!(listed.contains_key(key.as_slice()), "{key:?} weighs {weight} > n/k = {} yet is not listed", top.bound);
    }
    for (key, &(count, error)) in &listed {
        let weight = truth.get(*key).copied().unwrap_or(0);
        assert!(count - error <= weight && weight <= count, "{key:?}: {weight} not in [{count} − {error}, {count}]");
        assert!(error <= top.bound, "{key:?}: error {error} above n/k = {}", top.bound);
    }
    if top.keys.len() == k {
        assert_eq!(top.keys.iter().map(|entry| entry.count).sum::<u64>(), n, "the counts add up to n");
    }
}

/// A table of `k` counters fed `stream` (key, weight), read back as one epoch.
fn fed(k: usize, stream: &[(Vec<u8>, u64)]) -> (EpochTop, HashMap<Vec<u8>, u64>) {
    let mut table = SpaceSaving::new(k);
    let mut truth = HashMap::new();
    for (key, weight) in stream {
        table.add(key_hash(key), key, *weight);
        *truth.entry(key.clone()).or_default() += weight;
    }
    let top = EpochTop { start_micros: 0, total: table.total(), bound: table.bound(), keys: table.entries() };
    (top, truth)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn zipf_streams_keep_the_bound(
        k in 1usize..80, universe in 1usize..3000, s in 0.6f64..1.6,
        draws in vec(0.0f64..1.0, 1..5000), weights in vec(1u64..10, 1..5000),
    ) {
        let keys = zipf(&draws, universe, s);
        let stream: Vec<(Vec<u8>, u64)> =
            keys.iter().zip(weights.iter().cycle()).map(|(key, &weight)| (format!("k{key}").into_bytes(), weight)).collect();
        let (top, truth) = fed(k, &stream);
        assert_bound(&top, k, &truth);
    }

    #[test]
    fn a_key_just_above_n_over_k_among_one_off_keys_is_listed(
        k in 2usize..70, others in 0usize..4000, places in vec(any::<usize>(), 4000),
    ) {
        // One key appears just over `n / k` times; every other check is a key never seen
        // again, the stream that churns the smallest counter the most. With h heavy and o
        // others, n = h + o, and h > n / k exactly when h (k − 1) > o: the smallest such h.
        // (With k = 1 no key is ever above n / 1.)
        let heavy = others / (k - 1) + 1;
        let mut stream: Vec<(Vec<u8>, u64)> = (0..others).map(|i| (format!("once-{i}").into_bytes(), 1)).collect();
        for place in places.iter().take(heavy) {
            let at = place % (stream.len() + 1);
            stream.insert(at, (b"heavy".to_vec(), 1));
        }
        let (top, truth) = fed(k, &stream);
        prop_assert!(heavy as u64 > top.bound, "the heavy key is above n/k: {heavy} > {}", top.bound);
        assert_bound(&top, k, &truth);
    }

    #[test]
    fn bursts_at_an_epochs_turn_count_in_their_own_epoch(
        k in 1usize..40, before in vec((0u8..50, any::<bool>()), 0..600), after in vec((0u8..50, any::<bool>()), 0..600),
    ) {
        let clock = ManualClock::at(Timestamp::from_micros(5 * EPOCH_MICROS));
        let top = TopKeys::new(k);
        let mut truth = [HashMap::new(), HashMap::new()];
        // The last millisecond of the epoch, then the first one of the next.
        clock.advance(Duration::from_micros(EPOCH_MICROS - 1_000));
        for (epoch, burst) in [(0, before), (1, after)] {
            for (key, allowed) in burst {
                let key = format!("b{key}").into_bytes();
                top.record(clock.now(), key_hash(&key), &key, allowed, 1);
                if !allowed {
                    *truth[epoch].entry(key).or_default() += 1;
                }
                clock.advance(Duration::from_nanos(1_000));
            }
            clock.set(Timestamp::from_micros(6 * EPOCH_MICROS));
        }
        let [current, previous] = top.read(By::Denied, clock.now());
        prop_assert_eq!((current.start_micros, previous.start_micros), (6 * EPOCH_MICROS, 5 * EPOCH_MICROS));
        assert_bound(&previous, k, &truth[0]);
        assert_bound(&current, k, &truth[1]);
    }
}
