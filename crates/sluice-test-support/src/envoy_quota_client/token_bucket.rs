//! The token bucket Envoy 1.40 builds from a `TokenBucket` assignment: a real-valued level
//! that refills continuously at `tokens_per_fill / fill_interval` per second, capped at
//! `max_tokens`; a request takes one whole token.
//!
//! Envoy's quirks, kept here because a quota server must plan around them:
//! - the fill interval is cut to whole seconds before the division (`fill_interval: 1.5s`
//!   fills as `1s`), and the rate is at least one token a year;
//! - two assignments are "the same" (the bucket is kept, tokens and all) when `max_tokens`,
//!   `tokens_per_fill` and only the *nanoseconds* of `fill_interval` are equal: a change of
//!   whole seconds alone is not seen;
//! - a changed assignment starts at the old bucket's fill fraction, cut to a whole number of
//!   tokens: `floor(new_max × old_level / old_max)`; with no token bucket before, full.

use envoy_types::pb::envoy::r#type::v3::TokenBucket;
use std::time::Duration;

/// Envoy's floor on a token bucket's fill rate: one token a year.
const MIN_FILL_RATE: f64 = 1.0 / (365.0 * 24.0 * 60.0 * 60.0);

/// What Envoy compares of two `TokenBucket` assignments to decide whether one changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Shape {
    max_tokens: u32,
    tokens_per_fill: u32,
    fill_interval_nanos: i32,
}

impl Shape {
    /// The shape of `bucket`, as Envoy compares it (absent fields read as zero).
    pub(super) fn of(bucket: &TokenBucket) -> Shape {
        Shape {
            max_tokens: bucket.max_tokens,
            tokens_per_fill: bucket.tokens_per_fill.map_or(0, |value| value.value),
            fill_interval_nanos: bucket.fill_interval.map_or(0, |interval| interval.nanos),
        }
    }
}

/// A live token bucket: its level at a moment, and how it refills.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Tokens {
    max: f64,
    /// Tokens per second.
    rate: f64,
    level: f64,
    at: Duration,
}

impl Tokens {
    /// The bucket `bucket` builds at `now`, replacing `old` (the token bucket in force
    /// before, if any).
    pub(super) fn build(bucket: &TokenBucket, old: Option<&Tokens>, now: Duration) -> Tokens {
        let max = f64::from(bucket.max_tokens);
        let level = match old {
            // Envoy multiplies in floating point and stores the product as an integer.
            Some(old) => (max * (old.level_at(now) / old.max)).trunc(),
            None => max,
        };
        Tokens { max, rate: fill_rate(bucket), level, at: now }
    }

    /// The (fractional) tokens the bucket holds at `now`.
    pub(super) fn level_at(&self, now: Duration) -> f64 {
        let refilled = now.saturating_sub(self.at).as_secs_f64() * self.rate;
        // `min` ignores a NaN refill (an infinite rate times no time), as Envoy's does.
        self.max.min(self.level + refilled)
    }

    /// Takes one token at `now` if the bucket holds a whole one.
    pub(super) fn take(&mut self, now: Duration) -> bool {
        let level = self.level_at(now);
        if level < 1.0 {
            return false;
        }
        *self = Tokens { level: level - 1.0, at: now, ..*self };
        true
    }
}

/// Tokens per second: `tokens_per_fill` over the fill interval's whole seconds (infinite
/// under a second, as Envoy's division by zero is), at least [`MIN_FILL_RATE`].
fn fill_rate(bucket: &TokenBucket) -> f64 {
    let per_fill = f64::from(bucket.tokens_per_fill.map_or(0, |value| value.value));
    let interval = bucket.fill_interval.unwrap_or_default();
    let whole_seconds = interval.seconds.saturating_add(i64::from(interval.nanos) / 1_000_000_000);
    #[allow(clippy::cast_precision_loss)] // whole seconds of a fill interval are far below 2^53
    let rate = per_fill / whole_seconds as f64;
    rate.abs().max(MIN_FILL_RATE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::{Duration as ProtoDuration, UInt32Value};

    fn bucket(max_tokens: u32, tokens_per_fill: u32, seconds: i64) -> TokenBucket {
        TokenBucket {
            max_tokens,
            tokens_per_fill: Some(UInt32Value { value: tokens_per_fill }),
            fill_interval: Some(ProtoDuration { seconds, nanos: 0 }),
        }
    }

    #[test]
    fn a_bucket_refills_at_tokens_per_fill_over_the_interval_up_to_its_max() {
        let mut tokens = Tokens::build(&bucket(2, 1, 2), None, Duration::ZERO);
        assert!(tokens.take(Duration::ZERO) && tokens.take(Duration::ZERO) && !tokens.take(Duration::ZERO));
        assert!(!tokens.take(Duration::from_millis(1_900)), "half a token a second: not yet one");
        assert!(tokens.take(Duration::from_millis(2_000)));
        assert!((tokens.level_at(Duration::from_secs(100)) - 2.0).abs() < f64::EPSILON, "capped at max_tokens");
    }

    #[test]
    fn the_fill_interval_counts_in_whole_seconds() {
        let mut half = bucket(1, 1, 1);
        half.fill_interval = Some(ProtoDuration { seconds: 1, nanos: 500_000_000 });
        assert!((fill_rate(&half) - 1.0).abs() < f64::EPSILON, "1.5 s fills as 1 s");
        assert!(fill_rate(&bucket(1, 0, 60)) > 0.0, "at least a token a year");
    }

    #[test]
    fn a_replacement_starts_at_the_old_fill_fraction_cut_to_whole_tokens() {
        let mut old = Tokens::build(&bucket(10, 1, 3_600), None, Duration::ZERO);
        for _ in 0..6 {
            assert!(old.take(Duration::ZERO));
        }
        let new = Tokens::build(&bucket(20, 1, 3_600), Some(&old), Duration::ZERO);
        assert!((new.level_at(Duration::ZERO) - 8.0).abs() < f64::EPSILON);
        let odd = Tokens::build(&bucket(3, 1, 3_600), Some(&old), Duration::ZERO);
        assert!((odd.level_at(Duration::ZERO) - 1.0).abs() < f64::EPSILON, "3 × 0.4 = 1.2, cut to 1");
    }

    #[test]
    fn only_the_nanoseconds_of_the_fill_interval_tell_two_shapes_apart() {
        assert_eq!(Shape::of(&bucket(10, 1, 3_600)), Shape::of(&bucket(10, 1, 60)));
        assert_ne!(Shape::of(&bucket(10, 1, 60)), Shape::of(&bucket(10, 2, 60)));
        assert_ne!(Shape::of(&bucket(10, 1, 60)), Shape::of(&bucket(11, 1, 60)));
    }
}
