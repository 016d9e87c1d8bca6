//! Random valid policies of every algorithm, variant and alignment, for property tests.

use crate::Policy;
use crate::algorithm::fixed_window::{Alignment, FixedWindow};
use crate::algorithm::leaky_bucket::{LeakMode, LeakyBucket};
use crate::algorithm::sliding_log::{SlidingLog, SlidingLogVariant};
use crate::algorithm::sliding_window::{SlidingWindow, SlidingWindowSettings};
use crate::algorithm::token_bucket::{TokenBucket, TokenBucketSettings};
use proptest::prelude::*;
use std::time::Duration;

/// Parameters from tiny to the edge of what the constructors take.
fn number() -> impl Strategy<Value = u64> {
    prop_oneof![4 => 1..=100u64, 2 => 1..=1u64 << 40, 1 => 1..=(1u64 << 53)]
}

fn us(micros: u64) -> Duration {
    Duration::from_micros(micros)
}

/// Any policy the constructors accept (draws they refuse are discarded).
pub(crate) fn any_policy() -> impl Strategy<Value = Policy> {
    let flag = any::<bool>;
    let variant = |attempts: bool| if attempts { SlidingLogVariant::Attempts } else { SlidingLogVariant::Accepted };
    let alignment = |anchored: bool| if anchored { Alignment::Anchored } else { Alignment::Aligned };
    prop_oneof![
        (number(), number(), flag()).prop_filter_map("valid", move |(limit, window, attempts)| {
            SlidingLog::new(limit, us(window), variant(attempts)).ok().map(Policy::from)
        }),
        (number(), number(), flag(), 0..100u64).prop_filter_map("valid", move |(limit, window, anchored, offset)| {
            let offset = if anchored { 0 } else { offset };
            FixedWindow::new(limit, us(window), alignment(anchored), us(offset)).ok().map(Policy::from)
        }),
        (number(), number(), 1..=12u64, flag(), flag()).prop_filter_map(
            "valid",
            move |(limit, width, buckets, attempts, anchored)| {
                let window = us(width.checked_mul(buckets)?);
                let (variant, alignment) = (variant(attempts), alignment(anchored));
                let settings = SlidingWindowSettings { limit, window, buckets, variant, alignment };
                SlidingWindow::with_settings(settings).ok().map(Policy::from)
            }
        ),
        (number(), number(), number()).prop_filter_map("valid", |(capacity, refill_amount, interval)| {
            let settings = TokenBucketSettings { capacity, refill_amount, refill_interval: us(interval) };
            TokenBucket::new(settings).ok().map(Policy::from)
        }),
        (number(), 0..1000u64, flag()).prop_filter_map("valid", |(interval, burst, delay)| {
            let mode = if delay { LeakMode::Delay } else { LeakMode::NoDelay };
            LeakyBucket::new(us(interval), burst, mode).ok().map(Policy::from)
        }),
    ]
}

/// One policy of each algorithm.
pub(crate) fn every_kind() -> Vec<Policy> {
    let second = Duration::from_secs(1);
    vec![
        SlidingLog::new(3, second, SlidingLogVariant::Accepted).unwrap().into(),
        FixedWindow::new(3, second, Alignment::Aligned, Duration::ZERO).unwrap().into(),
        SlidingWindow::new(3, second, 2).unwrap().into(),
        TokenBucket::new(TokenBucketSettings { capacity: 3, refill_amount: 1, refill_interval: second })
            .unwrap()
            .into(),
        LeakyBucket::new(second, 2, LeakMode::NoDelay).unwrap().into(),
    ]
}
