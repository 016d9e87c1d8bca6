//! Durations as the JSON answers write them (`reset_after_us`, `delay_us`, …): whole
//! microseconds, the unit decisions are made in.

use std::time::Duration;

/// A duration in whole microseconds (decisions hold whole microseconds below 2^53); a
/// duration too long for a `u64` is written as `u64::MAX`.
pub(crate) fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}
