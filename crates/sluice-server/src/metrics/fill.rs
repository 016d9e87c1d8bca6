//! How close keys are to their limit: a histogram of `used / limit` at each decision, with
//! `used = limit − remaining`, labelled by policy only (`sluice_fill_ratio{policy}`). Only
//! decisions whose `remaining` is the key's are counted ([`super::policy_figures::measured`]).
//!
//! A denied decision's `remaining` is what was left (less than the cost), so a denial
//! shows how full the key was when it asked. The buckets are 0.5, 0.8, 0.9, 0.95 and 1;
//! a ratio is at most 1, so the `+Inf` bucket holds only what the 1 bucket holds.
//! The ratio is one float division (an integer one in `u128` costs tens of nanoseconds on
//! the check path); a ratio exactly on a bound falls in that bound's bucket, since a
//! division is correctly rounded (below 2^53, `used` and `limit` are exact in `f64`).

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds of the buckets; `+Inf` follows.
const BOUNDS: [f64; 5] = [0.5, 0.8, 0.9, 0.95, 1.0];

/// The ratio from which a decision counts as near its limit.
pub(crate) const NEAR_LIMIT: f64 = 0.8;

/// One policy's histogram of fill ratios.
#[derive(Clone, Debug, Default)]
pub(crate) struct FillHistogram {
    inner: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    /// Per bucket, not cumulative; the last one is `+Inf`.
    buckets: [AtomicU64; BOUNDS.len() + 1],
    /// The ratios' sum, in millionths (a ratio is at most 1: a million per decision).
    sum_millionths: AtomicU64,
}

impl FillHistogram {
    /// Records a decision that left `remaining` of `limit`; whether it was near the limit.
    pub(crate) fn observe(&self, limit: u64, remaining: u64) -> bool {
        let limit = limit.max(1);
        let ratio = limit.saturating_sub(remaining) as f64 / limit as f64;
        let bucket = BOUNDS.partition_point(|&bound| bound < ratio);
        let counts = &self.inner;
        counts.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        // The ratio is in 0..=1, so the product is in 0..=10^6 and the cast only rounds down.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let millionths = (ratio * 1e6) as u64;
        counts.sum_millionths.fetch_add(millionths, Ordering::Relaxed);
        ratio >= NEAR_LIMIT
    }

    /// The count of each bucket, not cumulative (the encoder adds them up), with its bound.
    fn buckets(&self) -> Vec<(f64, u64)> {
        let bounds = BOUNDS.into_iter().chain([f64::INFINITY]);
        bounds.zip(&self.inner.buckets).map(|(bound, count)| (bound, count.load(Ordering::Relaxed))).collect()
    }
}

impl TypedMetric for FillHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for FillHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let buckets = self.buckets();
        let count = buckets.iter().map(|&(_, count)| count).sum();
        let sum = self.inner.sum_millionths.load(Ordering::Relaxed) as f64 / 1e6;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_fall_in_the_bucket_of_their_bound() {
        let fill = FillHistogram::default();
        // used/limit: 0.1, 0.5 (on a bound), 0.85, 0.95, 1 (a denial with nothing left).
        let near: Vec<bool> = [(10, 9), (10, 5), (20, 3), (20, 1), (10, 0)]
            .into_iter()
            .map(|(limit, remaining)| fill.observe(limit, remaining))
            .collect();
        assert_eq!(near, [false, false, true, true, true]);
        let counts: Vec<u64> = fill.buckets().into_iter().map(|(_, count)| count).collect();
        assert_eq!(counts, [2, 0, 1, 1, 1, 0]);
    }

    #[test]
    fn the_sum_adds_the_ratios() {
        let fill = FillHistogram::default();
        fill.observe(4, 3);
        fill.observe(4, 1);
        assert_eq!(fill.inner.sum_millionths.load(Ordering::Relaxed), 1_000_000);
    }
}
