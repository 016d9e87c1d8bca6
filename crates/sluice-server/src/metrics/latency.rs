//! A latency histogram that worker threads record into without a lock.
//!
//! prometheus-client's `Histogram` keeps its buckets behind one mutex, which every check
//! of every worker thread took: a lock shared across cores on the hot path. Here each
//! thread records into a shard of its own (relaxed atomics on a cache line no other
//! thread writes), and `/metrics` adds the shards up.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in nanoseconds: 18 bounds from 5 µs, each twice the one
/// before (up to about 0.66 s), then `+Inf`.
const BOUNDS_NANOS: [u64; 18] = {
    let mut bounds = [0; 18];
    let mut index = 0;
    while index < bounds.len() {
        bounds[index] = 5_000 << index;
        index += 1;
    }
    bounds
};

/// Shards, enough for one per worker thread on common machines; threads beyond share.
const SHARDS: usize = 16;

/// One thread's counts, alone on its cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    /// Per bucket (not cumulative); the last one is `+Inf`. The count is their sum, so a
    /// scrape never shows a `_count` other than the `+Inf` bucket's.
    buckets: [AtomicU64; BOUNDS_NANOS.len() + 1],
    /// Wraps after 584 years of summed latency in one shard.
    sum_nanos: AtomicU64,
}

/// A histogram of durations, cheap to record into from many threads at once.
#[derive(Clone, Debug, Default)]
pub(crate) struct LatencyHistogram {
    shards: Arc<[Shard; SHARDS]>,
}

thread_local! {
    /// The shard this thread records into, given out in turn on a thread's first record.
    static SHARD: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The next shard to give out.
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

fn this_thread_shard() -> usize {
    SHARD.with(|shard| {
        shard.get().unwrap_or_else(|| {
            let index = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
            shard.set(Some(index));
            index
        })
    })
}

impl LatencyHistogram {
    /// Records one duration.
    pub(crate) fn observe(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let bucket = BOUNDS_NANOS.partition_point(|&bound| bound < nanos);
        let shard = &self.shards[this_thread_shard()];
        shard.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        shard.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The totals over every shard: (sum in seconds, count, per-bucket counts with bounds).
    fn totals(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let mut buckets: Vec<(f64, u64)> = BOUNDS_NANOS
            .iter()
            .map(|&bound| Duration::from_nanos(bound).as_secs_f64())
            .chain(std::iter::once(f64::INFINITY))
            .map(|bound| (bound, 0))
            .collect();
        let mut sum_nanos = 0_u128;
        for shard in self.shards.iter() {
            for (total, bucket) in buckets.iter_mut().zip(&shard.buckets) {
                total.1 += bucket.load(Ordering::Relaxed);
            }
            sum_nanos += u128::from(shard.sum_nanos.load(Ordering::Relaxed));
        }
        let count = buckets.iter().map(|&(_, count)| count).sum();
        // Exact to the nanosecond below 2^53 ns (104 days of summed latency), close after.
        let sum = sum_nanos as f64 / 1e9;
        (sum, count, buckets)
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let (sum, count, buckets) = self.totals();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    fn render(histogram: &LatencyHistogram) -> String {
        let mut registry = Registry::default();
        registry.register("latency_seconds", "test", histogram.clone());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn buckets_are_cumulative_and_bounded_by_their_upper_edge() {
        let histogram = LatencyHistogram::default();
        histogram.observe(Duration::from_micros(5)); // on the first bound: counted in it
        histogram.observe(Duration::from_micros(6));
        histogram.observe(Duration::from_secs(5)); // past every bound
        let text = render(&histogram);
        assert!(text.contains("latency_seconds_bucket{le=\"0.000005\"} 1\n"), "{text}");
        assert!(text.contains("latency_seconds_bucket{le=\"0.00001\"} 2\n"), "{text}");
        assert!(text.contains("latency_seconds_bucket{le=\"0.65536\"} 2\n"), "{text}");
        assert!(text.contains("latency_seconds_bucket{le=\"+Inf\"} 3\n"), "{text}");
        assert!(text.contains("latency_seconds_count 3\n"), "{text}");
        assert!(text.contains("latency_seconds_sum 5.000011\n"), "{text}");
    }

    #[test]
    fn threads_record_into_their_own_shards_and_every_record_counts() {
        let histogram = LatencyHistogram::default();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let histogram = histogram.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        histogram.observe(Duration::from_micros(20));
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|thread| thread.join().unwrap());
        let (sum, count, buckets) = histogram.totals();
        assert_eq!(count, 40_000);
        assert_eq!(buckets[2], (0.00002, 40_000));
        assert!((sum - 0.8).abs() < 1e-9, "{sum}");
    }
}
