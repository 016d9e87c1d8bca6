//! When shares are granted, renewed and given up: the reporting interval Envoys are
//! expected to keep, and the epoch-aligned windows no grant may cross.

use sluice_core::Timestamp;
use std::time::Duration;

/// What an assignment's time to live leaves Envoy at the end of a window: Envoy counts the
/// time to live from when the response reaches it, so this much later than it was sent
/// the assignment must still be over before the window ends.
pub(crate) const EDGE_MARGIN: Duration = Duration::from_millis(250);

/// How often the hub renews, closes, abandons and re-divides, when no report comes.
pub(crate) const TICK: Duration = Duration::from_millis(200);

/// How long before a share ends with its window it is replaced by a refusal, so that the
/// refusal reaches Envoy first: a share that lapsed would leave Envoy to its fallback
/// (`ALLOW_ALL`, if so configured) until the next window's share arrives.
pub(crate) const CLOSE_LEAD: Duration = Duration::from_secs(1);

/// The timing every bucket's shares follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timing {
    /// How often Envoys are expected to report usage (setting `rlqs_report_interval`).
    pub(crate) report_interval: Duration,
}

impl Timing {
    /// The time to live of a blanket rule (`ALLOW_ALL` or `DENY_ALL` for a whole rule):
    /// three reporting intervals, so that one lost report does not let it lapse.
    pub(crate) fn blanket_ttl(self) -> Duration {
        self.report_interval * 3
    }

    /// The time to live of a refusal: six reporting intervals. Most refusals go to idle
    /// Envoys, renewed for as long as they report; a long life keeps that traffic small
    /// (one response per Envoy and bucket every five intervals).
    pub(crate) fn refusal_ttl(self) -> Duration {
        self.report_interval * 6
    }

    /// A refusal with less than this left is renewed (one reporting interval).
    pub(crate) fn refusal_renew_within(self) -> Duration {
        self.report_interval
    }

    /// A holder that has not reported for this long (three reporting intervals) has
    /// stopped: its bucket is abandoned.
    pub(crate) fn stale_after(self) -> Duration {
        self.report_interval * 3
    }
}

/// Epoch-aligned windows of one limit's length: no grant outlives the window it was paid in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Windows {
    length_us: u64,
}

impl Windows {
    /// Windows of `length`; `None` when shorter than 3 s, as Envoy counts an assignment's
    /// time to live in whole seconds, and a share must live over [`CLOSE_LEAD`] and end
    /// [`EDGE_MARGIN`] before its window does.
    pub(crate) fn new(length: Duration) -> Option<Windows> {
        let length_us = u64::try_from(length.as_micros()).ok()?;
        (length >= Duration::from_secs(3)).then_some(Windows { length_us })
    }

    /// The window's length.
    pub(crate) fn length(self) -> Duration {
        Duration::from_micros(self.length_us)
    }

    /// The index of the window `now` falls in.
    pub(crate) fn index(self, now: Timestamp) -> u64 {
        now.as_micros() / self.length_us
    }

    /// When the window `now` falls in ends.
    pub(crate) fn end(self, now: Timestamp) -> Timestamp {
        Timestamp::from_micros((self.index(now) + 1).saturating_mul(self.length_us))
    }

    /// The time to live, in whole seconds and at most `longest`, of an assignment sent at
    /// `now` that must be over, [`EDGE_MARGIN`] after it reached Envoy, before the window
    /// ends; `None` when not even one second fits.
    pub(crate) fn ttl_at(self, now: Timestamp, longest: Duration) -> Option<Duration> {
        let left = self.end(now).saturating_since(now).saturating_sub(EDGE_MARGIN);
        let seconds = left.as_secs().min(longest.as_secs());
        (seconds > 0).then(|| Duration::from_secs(seconds))
    }

    /// The fill interval of every token bucket assigned in these windows: two windows and
    /// a second, so that the one token a fill adds never makes a whole token within the
    /// window a share lives in (a share ends with its window; see [`super::assignment`]).
    pub(crate) fn fill_interval(self) -> Duration {
        Duration::from_secs(self.length().as_secs() * 2 + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assignment_ends_before_its_window_with_the_margin_to_spare() {
        let minute = Windows::new(Duration::from_secs(60)).unwrap();
        let ttl = Duration::from_secs(15);
        let at = |seconds: f64| Timestamp::from_micros((seconds * 1e6) as u64);
        assert_eq!(minute.ttl_at(at(600.0), ttl), Some(ttl));
        assert_eq!(minute.ttl_at(at(650.5), ttl), Some(Duration::from_secs(9)));
        assert_eq!(minute.ttl_at(at(658.8), ttl), None, "0.95 s left, less the margin, is no whole second");
        assert_eq!(minute.ttl_at(at(658.7), ttl), Some(Duration::from_secs(1)));
        assert_eq!(Windows::new(Duration::from_secs(2)), None);
    }
}
