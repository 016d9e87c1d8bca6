//! A policy's parameters in a few words, as `check-config`, the dashboard's live view and
//! the replay report print them: `2 / 1 s`, `5 / 15 min, attempts`, `capacity 100, 10 per 1 s`.

use sluice_core::{Alignment, LeakMode, Policy, SlidingLogVariant};
use std::time::Duration;

/// The limit with its window (window algorithms), or the bucket's size and rate, followed
/// by whatever differs from the defaults (`attempts`, `anchored`, `offset 5 h`, `delay`).
pub(crate) fn describe(policy: &Policy) -> String {
    match policy {
        Policy::SlidingLog(log) => {
            let attempts = if log.variant() == SlidingLogVariant::Attempts { ", attempts" } else { "" };
            format!("{} / {}{attempts}", log.limit(), duration(log.window()))
        }
        Policy::FixedWindow(fixed) => {
            let placement = match (fixed.alignment(), fixed.offset()) {
                (Alignment::Anchored, _) => ", anchored".to_owned(),
                (Alignment::Aligned, offset) if offset.is_zero() => String::new(),
                (Alignment::Aligned, offset) => format!(", offset {}", duration(offset)),
            };
            format!("{} / {}{placement}", fixed.limit(), duration(fixed.window()))
        }
        Policy::SlidingWindow(window) => {
            let plural = if window.buckets() == 1 { "" } else { "s" };
            let attempts = if window.variant() == SlidingLogVariant::Attempts { ", attempts" } else { "" };
            let anchored = if window.alignment() == Alignment::Anchored { ", anchored" } else { "" };
            let (limit, span, buckets) = (window.limit(), duration(window.window()), window.buckets());
            format!("{limit} / {span}, {buckets} bucket{plural}{attempts}{anchored}")
        }
        Policy::TokenBucket(bucket) => {
            format!(
                "capacity {}, {} per {}",
                bucket.capacity(),
                bucket.refill_amount(),
                duration(bucket.refill_interval())
            )
        }
        Policy::LeakyBucket(bucket) => {
            let delay = if bucket.mode() == LeakMode::Delay { ", delay" } else { "" };
            format!("1 per {}, burst {}{delay}", duration(bucket.interval()), bucket.burst())
        }
    }
}

/// `count` policies in words: `1 policy`, `5 policies`.
pub(crate) fn policies(count: usize) -> String {
    if count == 1 { "1 policy".to_owned() } else { format!("{count} policies") }
}

/// `duration` in the largest unit that counts it whole: `15 min`, `1 s`, `250 ms`, `1500 µs`.
pub(crate) fn duration(duration: Duration) -> String {
    const UNITS: [(u128, &str); 6] =
        [(86_400_000_000, "d"), (3_600_000_000, "h"), (60_000_000, "min"), (1_000_000, "s"), (1_000, "ms"), (1, "µs")];
    let micros = duration.as_micros();
    let (size, unit) =
        UNITS.into_iter().find(|&(size, _)| micros.is_multiple_of(size) && micros >= size).unwrap_or((1, "µs"));
    format!("{} {unit}", micros / size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_config::ConfigError;

    /// The descriptions of every policy in `yaml` (a `policies:` mapping), by name.
    fn described(yaml: &str) -> Vec<(String, String)> {
        let mapping: serde_yaml_ng::Mapping = serde_yaml_ng::from_str(yaml).unwrap();
        let mut problems = ConfigError::default();
        let limits = sluice_core::config::parse_policies(&mapping, &mut problems);
        let limits = problems.into_result(limits).unwrap();
        limits.iter().map(|limit| (limit.name().to_owned(), describe(limit.policy()))).collect()
    }

    #[test]
    fn every_algorithm_reads_as_its_limit_and_window_or_its_rate() {
        let policies = described(
            "burst2: {algorithm: sliding_log, limit: 2, window: 1s}
login: {algorithm: sliding_log, limit: 5, window: 15m, variant: attempts}
hourly: {algorithm: fixed_window, limit: 5000, window: 1h}
daily: {algorithm: fixed_window, limit: 1000, window: 1d, offset: 5h}
trial: {algorithm: fixed_window, limit: 3, window: 1m, alignment: anchored}
search: {algorithm: sliding_window, limit: 10, window: 1m, buckets: 6}
haproxy: {algorithm: sliding_window, limit: 10, window: 10s, variant: attempts, alignment: anchored}
api: {algorithm: token_bucket, capacity: 100, refill_amount: 1, refill_interval: 10ms}
shaped: {algorithm: leaky_bucket, interval: 500ms, burst: 3, mode: delay}",
        );
        let texts: Vec<&str> = policies.iter().map(|(_, text)| text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "2 / 1 s",
                "5 / 15 min, attempts",
                "5000 / 1 h",
                "1000 / 1 d, offset 5 h",
                "3 / 1 min, anchored",
                "10 / 1 min, 6 buckets",
                "10 / 10 s, 1 bucket, attempts, anchored",
                "capacity 100, 1 per 10 ms",
                "1 per 500 ms, burst 3, delay",
            ]
        );
    }

    #[test]
    fn one_policy_is_one_policy() {
        assert_eq!([policies(0), policies(1), policies(5)], ["0 policies", "1 policy", "5 policies"]);
    }

    #[test]
    fn durations_use_the_largest_whole_unit() {
        let text = |micros| duration(Duration::from_micros(micros));
        assert_eq!(
            [text(90_000_000), text(1_500_000), text(1500), text(7_200_000_000)],
            ["90 s", "1500 ms", "1500 µs", "2 h"]
        );
    }
}
